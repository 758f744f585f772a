#!/usr/bin/env bash
# s64 call 4 (nvidia-h200; on any other card one run, to show the rows run, and exit 3): call 3 found the bulk copy's +7 % where every SM streams on
# the H200 belongs to the bulk copy, not to the block's contiguity. Would A by bulk copies too (token rows packed per
# row group and K block: `l1-bulkaw-mix`, `short-bulkaw-k`) add to it? Each CTA count twice (two processes).
# Carry build/s64q.tar.xz (mainloop_probe of this commit).
#   OUT=$OUT bash results/moe/runs/s64/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk64q && mkdir -p $B && tar xJf build/s64q.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
REPS="1 2"; grep -q H200 $O/gpu.txt || { echo "not an H200: the rows run once (that they run), then exit 3"; REPS=1; }
for rep in $REPS; do
  for c in 132 66 33; do
    timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe${c}_$rep.json > $O/probe${c}_$rep.log 2>&1
    echo "== $c CTAs, run $rep: rc=$?"
    grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-bulkaw-mix|l1-tma-mix-b|short-tma-k|short-bulkw-k|short-bulkaw-k|short-tma-k-b) " $O/probe${c}_$rep.log
  done
done
cd $O && tar czf ../c4.tgz . && cd .. && rm -rf $O
[ "$REPS" = 1 ] && exit 3 || exit 0
