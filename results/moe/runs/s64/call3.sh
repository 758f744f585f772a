#!/usr/bin/env bash
# s64 call 3 (nvidia-h200; runs on any card and says which): call 1's probe on the H200 had the weights as one 32 KB
# bulk copy of a pre-packed block 9 % faster than tensor boxes where every SM streams (132 CTAs: 0.544 against
# 0.498-0.501 of the tensor rate) and slower where few do (the copy's issue cost). The new rows load the same
# pre-packed bytes by tensor boxes of a K-block-major view (`l1-tmak-mix`: one {128 B, 256 rows} box = 32 contiguous
# KB; `short-tmak-k`: a half tile's four 8 KB pieces): is the gain the bytes' DRAM locality, at a tensor box's issue
# cost? Each CTA count twice (two processes). Carry build/s64p.tar.xz (mainloop_probe of this commit).
#   OUT=$OUT bash results/moe/runs/s64/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk64p && mkdir -p $B && tar xJf build/s64p.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for rep in 1 2; do
  for c in 132 66 33; do
    timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe${c}_$rep.json > $O/probe${c}_$rep.log 2>&1
    echo "== $c CTAs, run $rep: rc=$?"
    grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-tma-mix-b|short-tma-k|short-bulkw-k|short-tma3-k|short-tmak-k|short-tma-k-b) " $O/probe${c}_$rep.log
  done
done
cd $O && tar czf ../c3.tgz . && cd .. && rm -rf $O
