#!/usr/bin/env bash
# s24 call 7: the table of record again after the model/simulator change (auto's order at P = 1 now follows the
# simulator run on the kernel's tile widths: L1 256, L2 moe_l2_cols). Same kernel as call 3.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
for st in w8 w4 merge; do
  OUT=$OUT/study STEPS=$st bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"; el "$st"
  (cd $OUT && rm -f study/*/blocks.json && tar czf study.tgz study study.log)
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
