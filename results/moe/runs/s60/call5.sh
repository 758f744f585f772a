#!/usr/bin/env bash
# s60 call 5 (nvidia-h200, right after call 4 on the same build, main 9a8f63f): memcheck on the tile-edge tests of the
# tanh-silu build, then every Linear-1 tile first (Interleaved, lead 4096) beside auto's candidates (Expert-Wave plain and
# lagged, Interleaved at the knee) on every shape, W8A8 and W4A8, 2K and 8K tokens, same process: the data a rule for
# auto's lead needs (s59 measured it on DiT-MoE-XL only). Carry build/s59.tar.xz.
#   OUT=$OUT bash results/moe/runs/s60/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
if [ ! -x build/bench/moe/bench_moe ]; then
  mkdir -p build/pk && tar xJf build/s59.tar.xz -C build/pk
  mkdir -p build/bench/moe build/tests/moe_gpu
  cp build/pk/bench_moe build/bench/moe/ && cp build/pk/test_moe_layer_gpu build/tests/moe_gpu/
fi
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O/runs
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 150 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RaggedLinear2Tiles:MoeLayerGpu.HalfAndFullTiles' > $O/memcheck.log 2>&1
el "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/memcheck.log | tr '\n' ' ')"
for p in w8a8 w4a8; do
  left=$(( ${LIMIT:-520} - ($(date +%s) - T0) ))
  [ $left -gt 30 ] || { el "$p skipped"; continue; }
  timeout $left build/bench/moe/bench_moe --out $O/runs/$p --tokens 2048,8192 --routing balanced,skewed --precision $p \
    --orders wave,interleaved --compare-wave-lag --leads 4096 --worlds 1 --check-tokens 1 --block-s 0.04 --warmup-s 0.02 \
    > $O/runs/$p.log 2>&1
  el "$p rc=$?"
done
cd $O && rm -f runs/*/blocks.json && tar czf ../c5.tgz . && cd .. && rm -rf $O
