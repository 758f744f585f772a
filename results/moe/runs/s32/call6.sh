#!/usr/bin/env bash
# s32 call 6: the fused kernel's DRAM bytes and L2 throughput (ncu, one launch, clocks not locked) on V4-Pro and
# V4-Flash at 8K, balanced and skewed, Interleaved: how far the DRAM reads exceed the weights (a multi-row expert
# whose weights the L2 does not hold is read from DRAM once per row pair).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for s in deepseek-v4-pro deepseek-v4-flash; do for r in balanced skewed; do
  el "ncu $s $r"
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 1 --clock-control none \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    build/bench/moe/bench_moe --out $OUT/ncu-$s-$r --shapes $s --tokens 8192 --routing $r --precision w8a8 \
    --orders interleaved --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$s-$r.txt 2>&1
  echo "rc=$?"; grep -E "dram__|lts__|gpu__time" $OUT/ncu-$s-$r.txt
done; done
el done
cd $OUT && rm -f */blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
