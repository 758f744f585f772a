#!/usr/bin/env bash
# s29 call 1: the whole MoE GPU test suite on main (the review mend's option table, 5220939, had not run on a GPU),
# then bench/moe/stream_probe: what one SM's TMA pipeline streams with no tensor work (the kernel's row layout
# against packed weight boxes, CTA counts, stages, an A box from L2, a consumer hold per stage, multicast pairs).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el probe
timeout 120 build/bench/moe/stream_probe --gb 16 --k 7168 --reps 3 --csv $OUT/stream.csv > $OUT/stream.log 2>&1
echo "probe rc=$?"; cat $OUT/stream.log
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el done
