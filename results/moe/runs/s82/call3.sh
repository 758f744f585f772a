#!/usr/bin/env bash
# s82 call 3 (any sm_90 GPU): the whole GPU suite after the test audit's mends (causal refusals fail, the ceiling GEMMs
# checked against float64, the subnormal report's error bound, the MoE two-rank test by torch's module form) through
# gpu-tests-device.sh, which now exits 1 on any failure. Carry build/s82d.tar.xz (its `pack` of that build).
#   OUT=$OUT bash results/moe/runs/s82/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c3 && mkdir -p "$O"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s82d.tar.xz
echo "== gpu-tests-device.sh exit $?"
} 2>&1 | tee $O/out.txt
