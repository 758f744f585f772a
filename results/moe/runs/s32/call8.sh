#!/usr/bin/env bash
# s32 call 8: MoeLayerParams::group_rows (the Interleaved order walks the rows of an expert with at least N 128-row
# blocks N-tile-major, so they read each weight tile together while the L2 holds it). --compare-group-rows 2,4 (_g2,
# _g4) W8A8 at 8K and 32K on V4-Pro, V4-Flash, DeepSeek-V3, both orders (Expert-Wave ignores it: its ratio is the
# noise); ncu DRAM bytes and L2 traffic of V4-Pro 8K skewed and V4-Flash 8K balanced with --group-rows 0 and 2.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el "bench w8a8"
timeout 300 build/bench/moe/bench_moe --out $OUT/w8a8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-group-rows 2,4 --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8a8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8a8.log
for v in _g2 _g4; do python3 scripts/moe-variant-ratio.py $OUT/w8a8/moe.csv $v | grep -E "interleaved|geomean"; done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for t in "deepseek-v4-pro skewed" "deepseek-v4-flash balanced"; do for gr in 0 2; do
  set -- $t
  el "ncu $1 $2 group_rows $gr"
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 1 --clock-control none \
    --metrics dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
    build/bench/moe/bench_moe --out $OUT/ncu-$1-g$gr --shapes $1 --tokens 8192 --routing $2 --precision w8a8 \
    --orders interleaved --group-rows $gr --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$1-g$gr.txt 2>&1
  echo "rc=$?"; grep -E "dram__|lts__|gpu__time" $OUT/ncu-$1-g$gr.txt
done; done
el done
cd $OUT && rm -f */blocks.json && tar czf call8.tgz --exclude=call8.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call8.tgz -exec rm -rf {} +
