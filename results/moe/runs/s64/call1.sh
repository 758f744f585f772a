#!/usr/bin/env bash
# s64 call 1 (nvidia-h200): the P = 1 table (scripts/moe-study.sh STEPS="w8 w4 merge") on main b27245e's kernel with the
# memory floor's stream picking among all five load forms on the H200 (the table of record, s62 call 2, ran before
# the bulk-copy form existed), each form's rate in every row (stream_forms_tbps); first the mainloop probe's
# weight-load rows on 132 / 66 / 33 CTAs (call 1 ran them on an H100). Exits 3 on a card that is not an H200.
# Carry build/s64.tar.xz.
#   OUT=$OUT bash results/moe/runs/s64/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk64 && mkdir -p $B build/bench/moe && tar xJf build/s64.tar.xz -C $B && cp $B/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
grep -q H200 $O/gpu.txt || { echo "not an H200: stop"; exit 3; }
for c in 132 66 33; do
  timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe$c.json > $O/probe$c.log 2>&1
  el "probe $c CTAs rc=$?"
  grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tma-mix-b|short-tma-k|short-bulkw-k|short-tma3-k|short-tma-k-b) " $O/probe$c.log
done
for st in w8 w4 merge; do
  left=$(( ${TABLE_END:-582} - ($(date +%s) - T0) ))
  [ $left -gt 20 ] || { el "$st skipped"; continue; }
  OUT=$O/study STEPS=$st timeout $left bash scripts/moe-study.sh >> $O/study.log 2>&1
  el "$st rc=$?"
done
grep -E "deepseek-v4" $O/study.log | head -24
python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s.get(k) for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','bound_fraction_v4_w8a8_8k','bound_fraction_v4_w8a8_32k','memory_bound_configs','configs_fused_slower')})"
cd $O && rm -f study/*/blocks.json && tar czf ../c1.tgz . && cd .. && rm -rf $O
