#!/usr/bin/env bash
# s32 call 12 (call 11 ran a bench_moe whose object had been compiled against the header before the revert, a stale MoeLayerParams layout: its W4A8 step failed, its W8A8 numbers are not of the default kernel; discarded): the table of record on main's kernel after scale_prefetch was removed again (s31's kernel and the
# traced kernel's register-summed data wait): STEPS="w8 w4 merge" of scripts/moe-study.sh (P = 1, emulated P = 2, 4, 8 bit-identity).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for st in w8 w4 merge; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 150 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call12.tgz --exclude=call12.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call12.tgz -exec rm -rf {} +
