#!/usr/bin/env bash
# s67 call 4 (nvidia-h200 only; on any other card it prints the card and exits 3): session 64's probe rows with A by
# bulk copies too (l1-bulkaw-mix, short-bulkaw-k) beside l1-tma-mix / l1-bulkw-mix / short-tma-k on 132, 66 and 33
# CTAs, CTA counts in the order 132 66 33 33 66 132 (two processes each). Calls 2-3 ran the same rows on an H100.
# Carry build/s67a.tar.xz (mainloop_probe of main f7a47c7's build, stripped).
#   OUT=$OUT bash results/moe/runs/s67/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk67a && mkdir -p $B && { [ -x $B/mainloop_probe ] || tar xJf build/s67a.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
grep -q H200 $O/gpu.txt || { echo "not an H200: nothing run"; exit 3; }
i=0
for c in 132 66 33 33 66 132; do
  i=$((i + 1))
  timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe${c}_$i.json > $O/probe${c}_$i.log 2>&1
  echo "== $c CTAs, process $i: rc=$?"
  grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-bulkaw-mix|short-tma-k|short-bulkw-k|short-bulkaw-k) " $O/probe${c}_$i.log
done
