#!/usr/bin/env bash
# s24 call 5: which batch-timing variant carries the racecheck hazards of call 4 (build/old/test_rb: RaceBisect with
# single CTAs, one variant each: RB_ONLY 0 pingpong 1, 1 l2_scratches 2, 2 l2_hints 7, 3 l2_cols 128, 4 l2_cols 256).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for o in 0 1 2 3 4; do
  RB_ONLY=$o timeout 100 $SAN --tool racecheck --print-limit 2 build/old/test_rb --gtest_filter=MoeLayerGpu.RaceBisect \
    > $OUT/rb_only_$o.log 2>&1
  echo "variant $o exit $?: $(grep SUMMARY $OUT/rb_only_$o.log) passed=$(grep -c '^\[  PASSED' $OUT/rb_only_$o.log)"
done
