#!/usr/bin/env bash
# s54 call 1 (nvidia-h200): ragged 256-column Linear-2 tiles (hidden / 128 odd: DiT-MoE-XL's 1152). The MoE layer
# GPU tests (RaggedLinear2Tiles new; RandomValidShapes now draws ragged tiles where hidden / 128 is odd), memcheck on
# RaggedLinear2Tiles, then DiT-MoE-XL timed with 256 (auto now) beside 128 columns in one process (--compare-l2-cols),
# W8A8 and W4A8, both routings, 2K / 8K / 32K tokens. build/s54c1.tar.xz: test_moe_layer_gpu and bench_moe, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s54c1.tar.xz -C build/pk
mkdir -p build/tests/moe_gpu build/bench/moe
mv build/pk/test_moe_layer_gpu build/tests/moe_gpu/ && mv build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O/runs
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|RaggedLinear2Tiles|RejectsBadClusters" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 130 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RaggedLinear2Tiles' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tr '\n' ' ')"
for p in w8a8 w4a8; do
  timeout 120 build/bench/moe/bench_moe --out $O/runs/$p --shapes dit-moe-xl --tokens 2048,8192,32768 \
    --routing balanced,skewed --precision $p --orders wave,interleaved --worlds 1 --check-tokens 1 --compare-l2-cols \
    --block-s 0.05 --warmup-s 0.03 > $O/runs/$p.log 2>&1
  echo "$p rc=$?"; grep -E "^ *dit|ratio|_n " $O/runs/$p.log | head -40
done
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
