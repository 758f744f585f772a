#!/usr/bin/env bash
# s24 call 3: the merged kernel (epilogue warps, 256-column Linear-2 tiles by default where hidden % 512 == 0, the
# second half-tile barrier): the racecheck question on the barrier probe, GPU tests, sanitizers, the table of record
# (w8 w4 merge), then the long-block 32K points (big8 big4 merge) while time remains.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for m in named named-all sync; do
  timeout 60 $SAN --tool racecheck --print-limit 2 build/bench/moe/barrier_probe $m > $OUT/probe_$m.log 2>&1
  echo "probe $m exit $?: $(grep -E 'wrong values' $OUT/probe_$m.log) $(grep SUMMARY $OUT/probe_$m.log)"
done
el tests
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SANITIZE=1 MOE_TEST_TIMEOUT=45 \
  MOE_SAN_FILTER="MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.HalfAndFullTiles" \
  OUT=$OUT/tests bash scripts/moe-device.sh > $OUT/tests.log 2>&1
grep -E "exit|SUMMARY" $OUT/tests.log | head
echo "tests ok: $(grep -c 'rc=0 ' $OUT/tests/moe-tests.log) of $(grep -c 'rc=' $OUT/tests/moe-tests.log)"
grep -A12 "rc=[1-9]" $OUT/tests/moe-tests.log | head -40
grep -m4 -A3 "Error:" $OUT/tests/sanitize.log | head -20
(cd $OUT && tar czf tests.tgz tests probe_*.log && rm -rf tests)
el study
OUT=$OUT/study STEPS="w8 w4 merge" bash scripts/moe-study.sh > $OUT/study.log 2>&1
echo "study rc=$?"; grep -E "^configs|^orders|geomean" $OUT/study.log | head; cat $OUT/study/moe/table.md 2>/dev/null | tail -5
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in s if k not in ('configs','command','machine')})" 2>&1 | head -5
(cd $OUT && rm -f study/*/blocks.json && tar czf study.tgz study study.log && rm -rf study)
el big
if [ $(( $(date +%s) - T0 )) -lt 260 ]; then
  OUT=$OUT/big STEPS="big8 big4 merge" bash scripts/moe-study.sh > $OUT/big.log 2>&1
  echo "big rc=$?"; grep -E "^configs" $OUT/big.log | head
  (cd $OUT && rm -f big/*/blocks.json && tar czf big.tgz big big.log && rm -rf big)
fi
el done
