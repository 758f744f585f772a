#!/usr/bin/env bash
# s66 call 1 (nvidia-h200; on another card it runs item 2 only).
#  1. Session 64's unrun call 4: mainloop_probe rows l1-bulkaw-mix / short-bulkaw-k beside l1-tma-mix, l1-bulkw-mix,
#     short-tma-k ... on 132, 66 and 33 CTAs, each in two processes: does A by bulk copies add to the bulk-copied
#     weights' +7 % where every SM streams?
#  2. The tensor maps' L2 promotion (never varied: every map has 256 B): a diagnostic bench_moe (bench_moe_p, main
#     de518b6 + results/moe/runs/s66/l2-promo.patch: XSTAGE_DEBUG_L2_PROMO = 0 none, 2 128 B, 3 256 B) in processes
#     3 2 0 0 2 3 on the bar's W8A8 8K layers (V4-Pro, V4-Flash, both routings, Interleaved); the fused kernel's
#     median per process.
# Carry build/s66.tar.xz (mainloop_probe, test_moe_layer_gpu of main de518b6; bench_moe_p; stripped).
#   OUT=$OUT bash results/moe/runs/s66/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk66 && mkdir -p $B && tar xJf build/s66.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
if grep -q H200 $O/gpu.txt; then
  for rep in 1 2; do
    for c in 132 66 33; do
      timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe${c}_$rep.json > $O/probe${c}_$rep.log 2>&1
      el "probe $c CTAs, run $rep: rc=$?"
      grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-bulkaw-mix|l1-tma-mix-b|short-tma-k|short-bulkw-k|short-bulkaw-k|short-tma-k-b) " $O/probe${c}_$rep.log
    done
  done
fi
i=0
for v in 3 2 0 0 2 3; do
  i=$((i + 1))
  left=$(( 585 - ($(date +%s) - T0) ))
  [ $left -gt 40 ] || { el "$i promo $v skipped"; continue; }
  XSTAGE_DEBUG_L2_PROMO=$v timeout $left $B/bench_moe_p --out $O/p$i-v$v --shapes deepseek-v4-pro,deepseek-v4-flash \
    --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 \
    --warmup-s 0.03 > $O/p$i-v$v.log 2>&1
  el "$i promo $v rc=$? $(grep -c 'DEBUG: tensor maps' $O/p$i-v$v.log) debug line(s)"
done
python3 - $O <<'PY'
import json, sys, glob, os, statistics as st
o = sys.argv[1]; res = {}
for d in sorted(glob.glob(o + "/p*-v*")):
    if not os.path.isdir(d) or not os.path.exists(d + "/summary.json"): continue
    v = d.rsplit("-v", 1)[1]
    for r in json.load(open(d + "/summary.json"))["rows"]:
        k = (r["shape"], r["tokens"], r["routing"])
        res.setdefault(k, {}).setdefault(v, []).append(r["ms_fused_interleaved"])
print("shape tokens routing | fused ms, promotion 256 B (procs 1, 6) | 128 B (2, 5) | none (3, 4) | 128/256, none/256")
for k, v in sorted(res.items()):
    g = lambda x: v.get(x, [])
    m = lambda x: st.mean(g(x)) if g(x) else float("nan")
    print(*k, "|", " ".join(f"{x:.3f}" for x in g("3")), "|", " ".join(f"{x:.3f}" for x in g("2")), "|",
          " ".join(f"{x:.3f}" for x in g("0")), "|", f"{m('2') / m('3'):.3f} {m('0') / m('3'):.3f}")
PY
cd $O && rm -f */blocks.json && tar czf ../c1.tgz . && cd .. && rm -rf $O
