#!/usr/bin/env bash
# s32 call 2 (the test binary and the probe; bench_moe did not fit beside them in the carry): the MoE GPU tests with
# scale_prefetch (the option table flips it to 0: bit-identical), memcheck and synccheck on HalfAndFullTiles (the
# producer's prefetches), racecheck on PairShareEqualSingleCtas; the mainloop probe after the review mend a60947f
# (init_pipe, record_consumer), which had not run on a GPU: its rows against s31 call 6's.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
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
for c in 33 132; do
el "probe, HBM source, $c CTAs"
timeout 120 build/bench/moe/mainloop_probe --pipe-only --src-mb 16384 --kblocks 2048 --ctas $c --json $OUT/hbm$c.json > $OUT/hbm$c.log 2>&1
echo "rc=$?"; grep -E "variant|short" $OUT/hbm$c.log
done
el done
cd $OUT && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
