#!/usr/bin/env bash
# s32 call 7: MoeLayerParams::stream_evict (the weight loads of experts with one 128-row block carry L2 evict_first, so
# that the weights streamed for one row do not evict the popular experts' weights, which skewed V4-Pro reads from DRAM
# again for later row pairs). --compare-stream-evict (_s1) W8A8 at 8K and 32K on V4-Pro, V4-Flash, DeepSeek-V3, both
# orders; ncu DRAM bytes and L2 traffic of V4-Pro 8K skewed with --stream-evict 0 and 1.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el "bench w8a8"
timeout 300 build/bench/moe/bench_moe --out $OUT/w8a8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-stream-evict --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8a8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8a8.log
python3 scripts/moe-variant-ratio.py $OUT/w8a8/moe.csv _s1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for e in 0 1; do
  el "ncu v4-pro 8K skewed stream_evict $e"
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 1 --clock-control none \
    --metrics dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
    build/bench/moe/bench_moe --out $OUT/ncu-e$e --shapes deepseek-v4-pro --tokens 8192 --routing skewed --precision w8a8 \
    --orders interleaved --stream-evict $e --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-e$e.txt 2>&1
  echo "rc=$?"; grep -E "dram__|lts__|gpu__time" $OUT/ncu-e$e.txt
done
el done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
