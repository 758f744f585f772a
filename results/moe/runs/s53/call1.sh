#!/usr/bin/env bash
# s53 call 1 (nvidia-h200): the new MoeLayerGpu.RandomValidShapes (30 shapes drawn from everything the layer accepts),
# then the whole MoE layer test binary, then memcheck on the random shapes. build/s53c1.tar.xz: test_moe_layer_gpu, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
tar xJf build/s53c1.tar.xz -C /tmp && T=/tmp/t
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader > $O/gpu.txt
timeout 240 $T --gtest_filter='MoeLayerGpu.RandomValidShapes' > $O/random.log 2>&1
echo "random rc=$? $(grep -E '^\[  (PASSED|FAILED) |^random shapes' $O/random.log | tr '\n' ' ')"
grep -E "Failure|FAILED|error" $O/random.log | head -20
timeout 200 $T --gtest_filter='MoeLayerGpu.*:-MoeLayerGpu.RandomValidShapes' > $O/all.log 2>&1
echo "all rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/all.log | tr '\n' ' ')"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='MoeLayerGpu.RandomValidShapes' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/memcheck.log | tr '\n' ' ')"
