#!/usr/bin/env bash
# s32 call 9: the MoE GPU tests with group_rows (the option table flips group_rows 2: bit-identical; the rejects name
# group_rows 1 and group_rows with row_order 1); memcheck on HalfAndFullTiles.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 100 "$CS" --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $OUT/san_memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san_memcheck.log | tr '\n' ' ')"
el done
cd $OUT && tar czf call9.tgz --exclude=call9.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call9.tgz -exec rm -rf {} +
