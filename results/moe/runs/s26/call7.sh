#!/usr/bin/env bash
# s26 call 7: compute-sanitizer memcheck, racecheck and synccheck on the weight-sharing pairs' test
# (PairShareEqualSingleCtas: W8A8 and W4A8, both orders, P = 1 and emulated 2, pair_share 2 and 3, with the traced
# and pingpong W8A8 variant) and the trace test (every pair_share mode).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck synccheck racecheck; do
  timeout 150 $SAN --tool $tool --error-exitcode 3 --print-limit 12 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter=MoeLayerGpu.PairShareEqualSingleCtas:MoeLayerGpu.TraceRecordsEveryTile > $OUT/san_$tool.log 2>&1
  echo "$tool exit $?"; grep -m2 -A3 "Error:" $OUT/san_$tool.log; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_$tool.log | head -3
done
