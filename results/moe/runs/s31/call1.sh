#!/usr/bin/env bash
# s31 call 1: MoeLayerParams::l1_ring (a full tile's K block as four m64n64 batches through two scratches in turn, the
# lean W8A8 kernel). The MoE GPU tests (the option table flips l1_ring 1: bit-identical), the mainloop probe with the
# ring variants (l1-ring, l1-ring-ip, l1-tma-ring), --compare-ring (_r1) W8A8 at 8K/32K on five shapes, memcheck and
# synccheck on HalfAndFullTiles, racecheck on PairShareEqualSingleCtas.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el probe
timeout 90 build/bench/moe/mainloop_probe --json $OUT/probe.json > $OUT/probe.log 2>&1; echo "probe rc=$?"; cat $OUT/probe.log
el "bench w8a8"
timeout 230 build/bench/moe/bench_moe --out $OUT/w8a8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-ring --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8a8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8a8.log
python3 scripts/moe-variant-ratio.py $OUT/w8a8/moe.csv _r1
el sanitizers
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck; do
timeout 100 "$CS" --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $OUT/san_$tool.log 2>&1
echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
timeout 120 "$CS" --tool racecheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.PairShareEqualSingleCtas' > $OUT/san_racecheck.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/san_racecheck.log | tr '\n' ' ')"
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
