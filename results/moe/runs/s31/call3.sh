#!/usr/bin/env bash
# s31 call 3: what bounds a half tile streamed from HBM. The mainloop probe's pipeline variants with the short-tile
# consumers (short-half: the kernel's half_wide batch; short-swap: a swap-AB form with 32 tokens, half the tensor work;
# short-none: no tensor work), from the L2 (16 MB source) and from HBM (16 GB source) on 132, 66 and 33 CTAs.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el "probe, L2 source"
timeout 90 build/bench/moe/mainloop_probe --pipe-only --json $OUT/l2src.json > $OUT/l2src.log 2>&1; echo "rc=$?"; cat $OUT/l2src.log
for c in 132 66 33; do
el "probe, HBM source, $c CTAs"
timeout 120 build/bench/moe/mainloop_probe --pipe-only --src-mb 16384 --kblocks 2048 --ctas $c --json $OUT/hbm$c.json > $OUT/hbm$c.log 2>&1
echo "rc=$?"; cat $OUT/hbm$c.log
done
el done
cd $OUT && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
