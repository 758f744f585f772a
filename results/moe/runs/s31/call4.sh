#!/usr/bin/env bash
# s31 call 4: the release rule of a data-bound tile. Probe: short-half-late (the fused kernel's rule: block kb - 1's
# stage released once block kb's batch is issued) beside short-half (released when its batch is done), from HBM on
# 33 / 66 / 132 CTAs. Kernel (experiment build: the lean kernel honours early_release, which releases a stage right
# after its batch where the next one is late): --compare-early (_e1) on V4-Pro 2K (every tile a half tile) on 32 and
# 132 CTAs (with single CTAs, _c1, beside the pairs), and W8A8 8K on V4-Pro and V4-Flash, both orders.
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
for c in 32 132; do
el "v4-pro 2K on $c CTAs"
timeout 90 build/bench/moe/bench_moe --out $OUT/c$c --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
  --precision w8a8 --orders interleaved --ctas $c --compare-early --compare-single --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/c$c.log 2>&1
echo "rc=$?"; grep -E "fused" $OUT/c$c/moe.csv | cut -d, -f10,11,16,17
done
el "8K V4"
timeout 200 build/bench/moe/bench_moe --out $OUT/v4 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-early --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/v4.log 2>&1
echo "rc=$?"; tail -1 $OUT/v4.log
python3 scripts/moe-variant-ratio.py $OUT/v4/moe.csv _e1
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
