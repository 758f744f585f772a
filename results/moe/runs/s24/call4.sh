#!/usr/bin/env bash
# s24 call 4: racecheck bisection of the half-tile amax exchange hazards (HalfAndFullTiles). build/old/test_rb is
# test_moe_layer_gpu with a temporary test MoeLayerGpu.RaceBisect (one W8A8 case, P = 1, T = 642, H = 512,
# tile-edge routing, Expert-Wave; RB_MODE 0 CTA pairs, 1 single CTAs, 2 pairs + the batch-timing variants,
# 3 single CTAs + the variants). Not committed: the bisection's test lived only in that binary.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for mode in 0 1 2 3; do
  RB_MODE=$mode timeout 120 $SAN --tool racecheck --print-limit 4 build/old/test_rb --gtest_filter=MoeLayerGpu.RaceBisect \
    > $OUT/rb_$mode.log 2>&1
  echo "mode $mode exit $?: $(grep SUMMARY $OUT/rb_$mode.log) $(grep -cE '^\[  (PASSED|FAILED)' $OUT/rb_$mode.log)"
done
RB_MODE=1 timeout 120 $SAN --tool racecheck --racecheck-report hazard --print-limit 6 build/old/test_rb \
  --gtest_filter=MoeLayerGpu.RaceBisect > $OUT/rb_hazard.log 2>&1
echo "hazard report exit $?"; grep -vE "^\[|^Note|^Running" $OUT/rb_hazard.log | head -70
