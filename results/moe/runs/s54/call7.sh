#!/usr/bin/env bash
# s54 call 7 (nvidia-h200): after the duplicates mend (HalfAndFullTiles and RaggedLinear2Tiles share run_tile_edges):
# the MoE layer GPU tests on the final build, memcheck on RaggedLinear2Tiles. build/s54c7.tar.xz: test_moe_layer_gpu.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/tests/moe_gpu && tar xJf build/s54c7.tar.xz -C build/pk && mv build/pk/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
O=$OUT/c7 && mkdir -p $O
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|HalfAndFullTiles|RaggedLinear2Tiles" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 150 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RaggedLinear2Tiles' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tr '\n' ' ')"
