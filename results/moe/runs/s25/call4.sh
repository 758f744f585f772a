#!/usr/bin/env bash
# s25 call 4: the table of record on the kernel of calls 3 (W4A8 expanded in the kernel by default; W8A8 and bf16
# kernels unchanged, SASS identical to s24's): STEPS=w4, w8, merge of scripts/moe-study.sh, then big4 (W4A8 at 32768
# tokens with long blocks) if the call has time left.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
for st in w4 w8 merge; do
  OUT=$OUT/study STEPS=$st bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"; el "$st"
  (cd $OUT && rm -f study/*/blocks.json && tar czf study.tgz study study.log)
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
if [ $(( $(date +%s) - T0 )) -lt 380 ]; then
  OUT=$OUT/study STEPS="big4" bash scripts/moe-study.sh >> $OUT/big.log 2>&1
  echo "big4 rc=$?"; el big4
  python3 scripts/moe-summary.py --runs $OUT/study/big4 --out-moe $OUT/study/moe-big --out-schedule $OUT/study/moe-schedule-big >> $OUT/big.log 2>&1
  grep -E "^configs" $OUT/big.log | tail -2
  (cd $OUT && rm -f study/*/blocks.json && tar czf study.tgz study study.log big.log)
fi
el done
