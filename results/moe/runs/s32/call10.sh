#!/usr/bin/env bash
# s32 call 10: group_rows 2 on points call 8 did not see (W4A8, whose weights go through the same pairs and tiles):
# --compare-group-rows 2 (_g2) W4A8 at 8K and 32K on V4-Pro and DeepSeek-V3 (weight-sharing pairs) and V4-Flash,
# GLM-Flash (A-sharing pairs), Interleaved.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el "bench w4a8"
timeout 400 build/bench/moe/bench_moe --out $OUT/w4a8 --shapes deepseek-v4-pro,deepseek-v3,deepseek-v4-flash,glm-flash \
  --tokens 8192,32768 --precision w4a8 --orders interleaved --compare-group-rows 2 --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w4a8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w4a8.log
python3 scripts/moe-variant-ratio.py $OUT/w4a8/moe.csv _g2
el done
cd $OUT && rm -f */blocks.json && tar czf call10.tgz --exclude=call10.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call10.tgz -exec rm -rf {} +
