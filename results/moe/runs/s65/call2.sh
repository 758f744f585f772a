#!/usr/bin/env bash
# s65 call 2 (the machine call 1 left warm): main's GPU tests with the host code built under AddressSanitizer +
# UndefinedBehaviorSanitizer (scripts/sanitize.sh's build of 2199e80, a clean clone's), so the host paths only a GPU run
# reaches (the layer's preparation, plans, workspaces, launches, read-backs) are checked too. Device code is not
# instrumented. The ASan and UBSan runtimes travel with the binaries.
# Carry build/s65a.tar.xz (test_moe_layer_gpu and the two runtimes: the carry limit leaves no room for the attention library).
#   OUT=$OUT bash results/moe/runs/s65/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk65a && mkdir -p $B && tar xJf build/s65a.tar.xz -C $B
source scripts/moe-env.sh
export LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}"
# The CUDA driver maps memory in ASan's shadow gap; leaks: the first test reports them, the rest do not.
O=$OUT/c2 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for t in test_moe_layer_gpu; do
  leaks=1
  ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=$leaks" UBSAN_OPTIONS=print_stacktrace=1 timeout 420 $B/$t > $O/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/$t.log | tr '\n' ' ') sanitizer lines: $(grep -cE 'Sanitizer|runtime error' $O/$t.log)"
  grep -E "^\[  FAILED|ERROR: (Address|Leak)Sanitizer|runtime error" $O/$t.log | head -5
done
cd $O && tar czf ../c2.tgz . && cd .. && rm -rf $O
