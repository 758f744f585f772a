#!/usr/bin/env bash
# s69 call 2: the mainloop probe's pre-packed weight block split into pieces (l1-bulkw2-mix: two 16 KB bulk copies,
# l1-bulkw4-mix: four 8 KB) beside one 32 KB copy (l1-bulkw-mix) and the row-major boxes (l1-tma-mix), weights from HBM
# (--src-mb 16384) and from a source the L2 holds (--src-mb 40: A 8 MB, weights 32 MB), CTA counts 132 66 33 33 66 132.
# Question: does a split copy keep the block's gain where every SM streams and get back what one 32 KB copy loses where
# few SMs stream or the L2 holds the weights (the packed kernel ran 2-6 % slower on the compute-bound layers, s69 call 1)?
# Carry build/s69a.tar.xz (mainloop_probe of this session's probe commit, stripped).
#   OUT=$OUT bash results/moe/runs/s69/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk69a && mkdir -p $B && { [ -x $B/mainloop_probe ] || tar xJf build/s69a.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c2 && mkdir -p $O/w
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
i=0
for mb in 16384 40; do
  for c in 132 66 33 33 66 132; do
    i=$((i + 1))
    timeout 90 $B/mainloop_probe --pipe-only --rows l1-tma-mix,l1-bulkw-mix,l1-bulkw2-mix,l1-bulkw4-mix,l1-tma-mix-b --src-mb $mb --ctas $c --json $O/w/probe${mb}_${c}_$i.json > $O/w/probe${mb}_${c}_$i.log 2>&1
    echo "== src $mb MB, $c CTAs, process $i: rc=$?"
    grep -E "^(variant|l1-tma-mix|l1-bulkw-mix|l1-bulkw2-mix|l1-bulkw4-mix|l1-tma-mix-b) " $O/w/probe${mb}_${c}_$i.log
  done
done
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz *.json *.log *.txt 2>/dev/null)
rm -rf $O/w
