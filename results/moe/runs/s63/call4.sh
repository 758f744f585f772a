#!/usr/bin/env bash
# s63 call 4 (nvidia-h200): the small version of call 2 when too little device time is left for the whole table: on an
# H200 only (exits 3 otherwise), the mainloop probe's weight-load rows on 132 / 66 / 33 CTAs, then the V4 W8A8 points
# of the 8K bar and at 32K with the memory floor picking among all five stream forms (each form's rate printed).
# Carry build/s63.tar.xz.
#   OUT=$OUT bash results/moe/runs/s63/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk63 && mkdir -p $B && tar xJf build/s63.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
grep -q H200 $O/gpu.txt || { echo "not an H200: stop"; exit 3; }
for c in 132 66 33; do
  timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe$c.json > $O/probe$c.log 2>&1
  el "probe $c CTAs rc=$?"
  grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tma-mix-b|short-tma-k|short-bulkw-k|short-tma3-k|short-tma-k-b) " $O/probe$c.log
done
timeout 300 $B/bench_moe --out $O/v4 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192,32768 --precision w8a8 \
  --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $O/v4.log 2>&1
el "bench_moe V4 rc=$?"
grep -E "deepseek" $O/v4.log
python3 - "$O/v4/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for r in s["rows"]:
    f = r.get("stream_forms_tbps", {})
    print(r["shape"], r["tokens"], r["routing"], "ceiling", round(r.get("ceiling_fraction", 0), 3),
          "bound", round(r.get("bound_fraction", 0), 3), r.get("bound_by"), r.get("stream_variant"),
          round(r.get("stream_tbps", 0), 2), {k: round(v, 2) for k, v in f.items()})
PY
cd $O && rm -f */blocks.json && tar czf ../c4.tgz . && cd .. && rm -rf $O
