#!/usr/bin/env bash
# s60 call 5 (nvidia-h200, after call 4 on the same build): memcheck on the tile-edge tests (the tanh silu and the
# every-Linear-1-first variant), then auto's new choice on DiT-MoE-XL at token counts no rule was set on (held out:
# 1536, 3072, 6144, 12288; W8A8 and W4A8), every order in one process: Expert-Wave plain and lagged, Interleaved at
# the knee and every Linear-1 tile first (fused_l1first). Carry build/s60.tar.xz.
#   OUT=$OUT bash results/moe/runs/s60/call5.sh      (RUN_TESTS=1: the MoE layer GPU tests first; LIMIT: seconds)
set -uo pipefail
cd "$(dirname "$0")/../../../.."
if [ ! -x build/bench/moe/bench_moe ]; then
  mkdir -p build/pk && tar xJf build/s60.tar.xz -C build/pk
  mkdir -p build/bench/moe build/tests/moe_gpu
  cp build/pk/bench_moe build/bench/moe/ && cp build/pk/test_moe_layer_gpu build/tests/moe_gpu/
fi
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O/runs
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
if [ "${RUN_TESTS:-0}" = 1 ]; then
  timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
  el "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
fi
for p in w8a8 w4a8; do
  left=$(( ${LIMIT:-400} - ($(date +%s) - T0) ))
  [ $left -gt 30 ] || { el "$p skipped"; continue; }
  timeout $left build/bench/moe/bench_moe --out $O/runs/$p --shapes dit-moe-xl --tokens 1536,3072,6144,12288 \
    --routing balanced,skewed --precision $p --orders wave,interleaved --compare-wave-lag --compare-l1-first --worlds 1 \
    --check-tokens 1 --block-s 0.04 --warmup-s 0.02 > $O/runs/$p.log 2>&1
  el "$p rc=$?"
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
left=$(( ${MEMCHECK_END:-560} - ($(date +%s) - T0) ))
timeout $left $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RaggedLinear2Tiles:MoeLayerGpu.HalfAndFullTiles' > $O/memcheck.log 2>&1
el "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/memcheck.log | tr '\n' ' ')"
cd $O && rm -f runs/*/blocks.json && tar czf ../c5.tgz . && cd .. && rm -rf $O
