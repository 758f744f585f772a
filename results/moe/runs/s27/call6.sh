#!/usr/bin/env bash
# s27 call 6: every MoE GPU test on main after the review mend (make_map_2d delegating to make_map_nd; host code only).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
