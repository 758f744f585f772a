#!/usr/bin/env bash
# Every GPU test, binary by binary, from stripped binaries carried to a GPU host in one archive (no ctest there: the
# host's CMake is not the build machine's). Two steps:
#   here (after the build):  bash scripts/gpu-tests-device.sh pack build/gpu-tests.tar.xz
#   on the GPU host:         OUT=DIR bash scripts/gpu-tests-device.sh run build/gpu-tests.tar.xz
# `run` prints one line per test binary and Python test file, then a memcheck of two MoE layer tests; the logs land
# in $OUT/gpu-tests/logs.tgz (beside gpus.txt). Tests that need two GPUs (real ranks) skip on one. XSTAGE_BUILD_DIR: the build to pack (build).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mode=${1:-} archive=${2:-}
BINS="runtime/test_runtime_gpu kernel/test_peer_store_gpu ulysses/test_ulysses_gpu attention/test_attention_gpu
      moe_gpu/test_fp8_wgmma_gpu moe_gpu/test_unfused_gpu moe_gpu/test_unfused_ep_gpu moe_gpu/test_moe_layer_gpu"
PYTESTS="tests/attention/test_python_module.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py
         tests/moe_gpu/test_python_moe.py"
if [ -z "$archive" ] || { [ "$mode" != pack ] && [ "$mode" != run ]; }; then
  echo "usage: $0 pack|run ARCHIVE.tar.xz (got '${1:-}' '${2:-}')" >&2; exit 2
fi
if [ "$mode" = pack ]; then
  B=${XSTAGE_BUILD_DIR:-build} && S=$(mktemp -d) || exit 1
  for t in $BINS; do cp "$B/tests/$t" "$S/" || exit 1; done
  cp "$B/src/kernels/attention/libxstage_attention.so" "$B/src/cli/xstage" "$S/" || exit 1
  strip --strip-debug "$S"/* && tar cJf "$archive" -C "$S" . && rm -rf "$S" && ls -l "$archive"
  exit
fi
[ -f "$archive" ] || { echo "$0: no archive '$archive'" >&2; exit 2; }
[ -n "${OUT:-}" ] || { echo "$0: set OUT to the folder for the logs" >&2; exit 2; }
S=$(mktemp -d) && tar xJf "$archive" -C "$S" || exit 1
# The build tree's layout: the real-rank tests start their children from the binary's own path.
for t in $BINS; do mkdir -p "build/tests/$(dirname $t)" && mv "$S/$(basename $t)" "build/tests/$t"; done
mkdir -p build/src/kernels/attention build/src/cli
mv "$S/libxstage_attention.so" build/src/kernels/attention/ && mv "$S/xstage" build/src/cli/ && rm -rf "$S"
source scripts/moe-env.sh
lib=$(realpath build/src/kernels/attention/libxstage_attention.so) || exit 1
export XSTAGE_ATTENTION_LIB=$lib PYTHONPATH=python
export PYTHONDONTWRITEBYTECODE=1
O=$OUT/gpu-tests && mkdir -p "$O"
failed=""
nvidia-smi -L > "$O/gpus.txt"; cat "$O/gpus.txt"
for t in $BINS; do
  n=$(basename $t); timeout 300 build/tests/$t > "$O/$n.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || failed="$failed $n"
  echo "$n rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$O/$n.log" | tr '\n' ' ')skipped tests:" \
       "$(grep -cE '^\[  SKIPPED \] [^ ]+ \(' "$O/$n.log")"
done
grep -E "^\[  FAILED|Failure" "$O"/*.log | head -20
for t in $PYTESTS; do
  n=$(basename $t .py); timeout 240 python3 tests/attention/run_pytest.py $t > "$O/$n.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || failed="$failed $n"  # 77: every test skipped, which on a GPU host is a failure too
  echo "$t rc=$rc $(tail -1 "$O/$n.log")"
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 200 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.EmulatedP2' > "$O/memcheck_moe.log" 2>&1
rc=$?; [ $rc -eq 0 ] || failed="$failed memcheck"
echo "memcheck rc=$rc $(grep -E 'ERROR SUMMARY' "$O/memcheck_moe.log" | tr '\n' ' ')"
# The device tool returns a few files: the logs in one archive.
(cd "$O" && tar czf ../gpu-tests-logs.tgz *.log *.txt && rm -f *.log) && mv "$OUT/gpu-tests-logs.tgz" "$O/logs.tgz"
[ -z "$failed" ] || { echo "FAILED:$failed"; exit 1; }
echo "every GPU test binary, Python file and the memcheck passed"
