#!/usr/bin/env bash
# s61 call 2 (nvidia-h200): the kernel's load and order options on today's kernel (main ea32cf9) at the 8K bar's points,
# all in one process beside the default and its identical-work control: V4-Pro and V4-Flash, W8A8, 8192 tokens, both
# routings, Interleaved (auto's order there). Most were last measured 25-30 sessions ago on older kernels. Two processes
# of the same command (the second shows what moves between processes). Carry build/s61.tar.xz.
#   OUT=$OUT bash results/moe/runs/s61/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/bench/moe && tar xJf build/s61.tar.xz -C build/pk && cp build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c2 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do
  left=$(( ${END:-560} - ($(date +%s) - T0) ))
  [ $left -gt 40 ] || { el "p$r skipped"; continue; }
  timeout $left build/bench/moe/bench_moe --out $O/p$r --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 \
    --compare-control --compare-l1-first --compare-row-order --compare-pair-share --compare-hints 1,2,4 \
    --compare-early --compare-half-wide --block-s 0.06 --warmup-s 0.03 --rounds 2 > $O/p$r.log 2>&1
  el "p$r rc=$?"
done
python3 - "$O" <<'PY'
import csv, glob, os, sys, statistics as st
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'p*/moe.csv'))):
    rows = list(csv.DictReader(open(f)))
    keys = [k for k in rows[0] if k in ('shape', 'routing', 'backend', 'median_ms', 'min_ms', 'max_ms', 'ratio_vs_fused', 'flipped')]
    print(f, keys)
    for r in rows:
        print(' '.join(str(r.get(k, '')) for k in keys))
PY
cd $O && rm -f */blocks.json && tar czf ../c2.tgz . && cd .. && rm -rf $O
