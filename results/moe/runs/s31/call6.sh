#!/usr/bin/env bash
# s31 call 6: short-half grown toward the fused kernel: short-tma (the kernel's TMA tensor loads: A box, A row scales, four
# 64-row weight boxes per stage) and short-tma-k (also the kernel's consumer: scales per K block, the release rule),
# streamed from HBM on 33 / 66 / 132 CTAs beside short-half and short-none.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for c in 33 66 132; do
el "probe, HBM source, $c CTAs"
timeout 120 build/bench/moe/mainloop_probe --pipe-only --src-mb 16384 --kblocks 2048 --ctas $c --json $OUT/hbm$c.json > $OUT/hbm$c.log 2>&1
echo "rc=$?"; grep -E "variant|short" $OUT/hbm$c.log
done
el done
cd $OUT && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
