#!/usr/bin/env bash
# s24 call 6: does racecheck flag the half-tile amax exchange when the PingPong turn (bar.arrive / bar.sync on
# barriers 2, 3) runs around it? (call 5: the kernel's hazards come only with MoeLayerParams::pingpong = 1)
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for m in named pingpong; do
  build/bench/moe/barrier_probe $m
  timeout 60 $SAN --tool racecheck --print-limit 2 build/bench/moe/barrier_probe $m > $OUT/probe_$m.log 2>&1
  echo "racecheck $m exit $?: $(grep SUMMARY $OUT/probe_$m.log)"; grep -m1 -A1 "Error:" $OUT/probe_$m.log | cut -c1-300
  timeout 60 $SAN --tool synccheck build/bench/moe/barrier_probe $m > $OUT/sync_$m.log 2>&1
  echo "synccheck $m exit $?: $(grep SUMMARY $OUT/sync_$m.log)"
done
