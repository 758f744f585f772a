#!/usr/bin/env bash
# s66 call 4 (any card): call 3's sanitized MoE layer tests stopped at FewerTokensThanCapacity, where UBSan found a
# null pointer passed to memcmp (a full rank's empty poison tail; the test now compares through same_bytes). The
# tests call 3 did not reach, with the host code under ASan + UBSan (the 32 before it ran clean in call 3).
# Carry build/s66d.tar.xz (test_moe_layer_gpu of build-asan at this commit as test_moe_layer_gpu_asan, libasan.so.8,
# libubsan.so.1; stripped).
#   OUT=$OUT bash results/moe/runs/s66/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk66d && mkdir -p $B && tar xJf build/s66d.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
F="MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.DevicePlanTablesManyExperts:MoeLayerGpu.DevicePlanRejectsBadRouting"
F="$F:MoeLayerGpu.RejectsBadClusters:MoeLayerGpu.Bf16RejectsBadInput:MoeLayerReal*"
LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}" ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1" \
  UBSAN_OPTIONS=print_stacktrace=1 timeout 300 $B/test_moe_layer_gpu_asan --gtest_filter="$F" > $O/test_moe_layer_gpu_asan.log 2>&1
echo "asan test_moe_layer_gpu (rest) rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu_asan.log | tr '\n' ' ') sanitizer lines: $(grep -cE 'Sanitizer|runtime error' $O/test_moe_layer_gpu_asan.log)"
grep -E "^\[  FAILED|ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" $O/test_moe_layer_gpu_asan.log | head -8
cd $O && tar czf ../c4.tgz . && cd .. && rm -rf $O
