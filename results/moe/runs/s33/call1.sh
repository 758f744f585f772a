#!/usr/bin/env bash
# s33 call 1 (binaries carried as build/bins.tar.xz): clusters of four (cluster 4). The MoE GPU tests (the new
# QuadClustersEqualSingleCtas: modes 1, 2, 3 and traced, bit-identical to single CTAs; RejectsBadClusters' new
# errors), memcheck / synccheck / racecheck on QuadClustersSingleRank; then W8A8 8K and 32K on five shapes, both
# orders, with --compare-cluster4 (_q1: A four ways, _q3: A and weights two ways) and --compare-control (_ctl).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/bins.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/ && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out|OK \] MoeLayerGpu.Quad" $OUT/test.log | head -20
el sanitizers
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck racecheck; do
timeout 80 "$CS" --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.QuadClustersSingleRank' > $OUT/san_$tool.log 2>&1
echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
el "bench w8a8"
timeout 330 build/bench/moe/bench_moe --out $OUT/w8a8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-cluster4 --compare-control --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8a8.log 2>&1
echo "bench rc=$?"; grep -E "clusters of four|NO$" $OUT/w8a8.log | head -4; tail -1 $OUT/w8a8.log
for v in _q1 _q3 _ctl; do python3 scripts/moe-variant-ratio.py $OUT/w8a8/moe.csv $v; done
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
