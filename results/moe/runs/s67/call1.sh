#!/usr/bin/env bash
# s67 call 1 (any card; the probe rows only on an H200):
#  1. The 9 MoE layer GPU tests session 66's sanitized run did not reach (s66 call 4), host code under ASan + UBSan,
#     on the fixed test (0692467).
#  2. The Release MoE layer GPU suite on the same test file (main f7a47c7's build; the kernels are session 59's).
#  3. On an H200 only: session 64's unrun probe rows (A by bulk copies too: l1-bulkaw-mix, short-bulkaw-k) beside
#     l1-tma-mix / l1-bulkw-mix / short-tma-k, on 132, 66 and 33 CTAs, two processes each.
# Carry build/s67a.tar.xz (stripped: test_moe_layer_gpu_asan of build-asan with libasan.so.8 / libubsan.so.1,
# test_moe_layer_gpu and mainloop_probe of build, main f7a47c7).
#   OUT=$OUT bash results/moe/runs/s67/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk67a && mkdir -p $B && tar xJf build/s67a.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
F="MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.DevicePlanTablesManyExperts:MoeLayerGpu.DevicePlanRejectsBadRouting"
F="$F:MoeLayerGpu.RejectsBadClusters:MoeLayerGpu.Bf16RejectsBadInput:MoeLayerReal*"
# The CUDA driver maps memory in ASan's shadow gap (protect_shadow_gap=0); leaks are reported at exit.
LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}" ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1" \
  UBSAN_OPTIONS=print_stacktrace=1 timeout 300 $B/test_moe_layer_gpu_asan --gtest_filter="$F" > $O/test_moe_layer_gpu_asan.log 2>&1
el "asan test_moe_layer_gpu (rest) rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu_asan.log | tr '\n' ' ') sanitizer lines: $(grep -cE 'Sanitizer|runtime error' $O/test_moe_layer_gpu_asan.log)"
grep -E "^\[  FAILED|ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" $O/test_moe_layer_gpu_asan.log | head -8
timeout 300 $B/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
el "release test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED" $O/test_moe_layer_gpu.log | head -8
if grep -q H200 $O/gpu.txt; then
  for rep in 1 2; do
    for c in 132 66 33; do
      timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe${c}_$rep.json > $O/probe${c}_$rep.log 2>&1
      el "probe $c CTAs, run $rep: rc=$?"
      grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-bulkaw-mix|short-tma-k|short-bulkw-k|short-bulkaw-k) " $O/probe${c}_$rep.log
    done
  done
else
  echo "not an H200: the probe rows did not run"
fi
cd $O && tar czf ../c1.tgz . && cd .. && rm -rf $O
