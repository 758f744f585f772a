#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (host code only: nvcc's device code is
# not instrumented; compute-sanitizer covers the kernels on a GPU host). Any report fails the run: leaks, out-of-
# bounds reads, signed overflow, out-of-range enum loads (a C caller's bad value read through an enum type).
# Its own build folder (XSTAGE_SANITIZE_DIR, default build-asan), Release flags: the optimized code users run is
# what gets checked. CI (.ci/run) runs it after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${XSTAGE_SANITIZE_DIR:-build-asan}
bash scripts/deps.sh
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
cmake --build "$build" -j "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# Python loads the sanitized C ABI libraries with ctypes: the ASan runtime must come first in that process, and the
# interpreter's own allocations at exit are not ours to report.
py_tests='python_abi'
ctest --test-dir "$build" -L '^cpu$' -E "$py_tests" --output-on-failure -j "$(nproc)"
rt="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
LD_PRELOAD="$rt" ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  ctest --test-dir "$build" -L '^cpu$' -R "$py_tests" --output-on-failure -j "$(nproc)"
