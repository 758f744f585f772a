#!/usr/bin/env bash
# s32 call 3: --compare-scale-prefetch (_p0: the scales read where needed) W8A8 at 8K and 32K on five shapes, both orders.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el "bench w8a8"
timeout 400 build/bench/moe/bench_moe --out $OUT/w8a8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-scale-prefetch --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8a8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8a8.log
python3 scripts/moe-variant-ratio.py $OUT/w8a8/moe.csv _p0
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
