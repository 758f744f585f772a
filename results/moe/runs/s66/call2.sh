#!/usr/bin/env bash
# s66 call 2 (any card; session 65's unrun call 2): the MoE layer GPU tests with the host code built under
# AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh's flags, build-asan of main de518b6), so the host
# paths only a GPU run reaches (the layer's preparation, plans, workspaces, launches, read-backs) are checked too,
# then the same tests from main's Release build (test_moe_layer_gpu of build/s66.tar.xz, where call 1 left it). Device code is not
# instrumented. The ASan and UBSan runtimes travel with the binary.
# Carry build/s66a.tar.xz (test_moe_layer_gpu of build-asan, libasan.so.8, libubsan.so.1).
#   OUT=$OUT bash results/moe/runs/s66/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk66a && mkdir -p $B && tar xJf build/s66a.tar.xz -C $B
R=build/pk66  # unpacked by call 1 on this machine (ignored build outputs stay between calls on a warm machine)
source scripts/moe-env.sh
O=$OUT/c2 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
# The CUDA driver maps memory in ASan's shadow gap (protect_shadow_gap=0); leaks are reported at exit.
LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}" ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1" \
  UBSAN_OPTIONS=print_stacktrace=1 timeout 400 $B/test_moe_layer_gpu > $O/test_moe_layer_gpu_asan.log 2>&1
echo "asan test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu_asan.log | tr '\n' ' ') sanitizer lines: $(grep -cE 'Sanitizer|runtime error' $O/test_moe_layer_gpu_asan.log)"
grep -E "^\[  FAILED|ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" $O/test_moe_layer_gpu_asan.log | head -8
[ -x $R/test_moe_layer_gpu ] && timeout 180 $R/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
cd $O && tar czf ../c2.tgz . && cd .. && rm -rf $O
