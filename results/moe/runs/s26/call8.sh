#!/usr/bin/env bash
# s26 call 8: call 7's racecheck flagged only the pingpong variant (the known racecheck limitation at the half tiles'
# amax exchange with the turn's bar.arrive, docs/MOE.md s24), now a test of its own (PairShareWithPingpong): racecheck
# on PairShareEqualSingleCtas and TraceRecordsEveryTile without it, then the pingpong test itself (plain, memcheck).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
B=build/tests/moe_gpu/test_moe_layer_gpu
timeout 150 $SAN --tool racecheck --error-exitcode 3 --print-limit 12 $B \
  --gtest_filter=MoeLayerGpu.PairShareEqualSingleCtas:MoeLayerGpu.TraceRecordsEveryTile > $OUT/san_racecheck.log 2>&1
echo "racecheck exit $?"; grep -m2 -A3 "Error:" $OUT/san_racecheck.log; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_racecheck.log | head -3
timeout 60 $B --gtest_filter=MoeLayerGpu.PairShareWithPingpong > $OUT/pingpong.log 2>&1
echo "pingpong test exit $?"; grep -E "PASSED|FAILED|Failure" $OUT/pingpong.log | head -3
timeout 100 $SAN --tool memcheck --error-exitcode 3 --print-limit 12 $B --gtest_filter=MoeLayerGpu.PairShareWithPingpong \
  > $OUT/san_memcheck_pp.log 2>&1
echo "memcheck (pingpong test) exit $?"; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_memcheck_pp.log | head -3
