#!/usr/bin/env bash
# s29 call 3: call 2's stream_probe again (its 5-stage mixed run did not fit in shared memory and stopped the probe).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
timeout 120 build/bench/moe/stream_probe --gb 16 --k 7168 --reps 3 --csv $OUT/stream.csv > $OUT/stream.log 2>&1
echo "probe rc=$?"; sed -n '/^mixed/,$p' $OUT/stream.log
