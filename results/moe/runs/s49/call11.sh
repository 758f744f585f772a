#!/usr/bin/env bash
# s49 call 11 (nvidia-h200): MoeWorkspace::check on the caller's stream, and the new RunsOnTheCallersStream test (the
# layer on a non-blocking stream of the test's own); every MoE layer test, memcheck on the new one.
# build/s49c11.tar.xz: the stripped test_moe_layer_gpu.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/tests/moe_gpu && tar xJf build/s49c11.tar.xz -C /tmp && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
O=$OUT/c11 && mkdir -p $O
timeout 240 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) |OK \] MoeLayerGpu.RunsOn' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
timeout 150 $SAN --tool memcheck --error-exitcode 3 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RunsOnTheCallersStream' > $O/memcheck.log 2>&1; echo "memcheck exit $?"
grep "ERROR SUMMARY" $O/memcheck.log
cd $O && tar czf ../call11.tgz * && cd .. && rm -rf c11
