#!/usr/bin/env bash
# s25 call 6: W8A8 at 32768 tokens with long blocks (STEPS=big8 of scripts/moe-study.sh) on this session's build (the
# W8A8 kernel's SASS is the same as s24's): in call 4's short-block table DeepSeek-V4-Pro W8A8 32K (1.036, 1.024) and
# W4A8 DeepSeek-V3 balanced 32K (1.010) flip with the ABBA order; call 4's big4 gave W4A8 none flipped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
OUT=$OUT/study STEPS="big8" bash scripts/moe-study.sh > $OUT/big8.log 2>&1
echo "big8 rc=$? t=$(( $(date +%s) - T0 ))s"
python3 scripts/moe-summary.py --runs $OUT/study/big8 --out-moe $OUT/study/moe-big8 --out-schedule $OUT/study/moe-schedule-big8 >> $OUT/big8.log 2>&1
grep -E "^configs" $OUT/big8.log | tail -2
python3 - $OUT/study/big8/summary.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for r in s['rows']:
    print(r['shape'], r['routing'], round(r['fused_vs_unfused'], 3), 'flipped' if r.get('fused_vs_unfused_flipped') else '')
PY
(cd $OUT && rm -f study/*/blocks.json && tar czf call6.tgz study big8.log)
