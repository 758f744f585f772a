#!/usr/bin/env bash
# s33 call 2 (bench_moe carried as build/bins.tar.xz): what clusters of four change in the L2 and DRAM traffic (ncu,
# one fused launch, clocks not locked, Interleaved, 8K W8A8): V4-Pro skewed and V4-Flash balanced, the default (pairs,
# 132 CTAs) against cluster 4 with pair_share 3 (A and weights two ways) and 1 (A four ways), 120 CTAs.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp bench_moe && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for t in "deepseek-v4-pro skewed 0 0" "deepseek-v4-pro skewed 4 3" "deepseek-v4-pro skewed 4 1" \
         "deepseek-v4-flash balanced 0 0" "deepseek-v4-flash balanced 4 3" "deepseek-v4-flash balanced 4 1"; do
  set -- $t
  el "ncu $1 $2 cluster $3 pair_share $4"
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 1 --clock-control none \
    --metrics dram__bytes_read.sum,gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed \
    build/bench/moe/bench_moe --out $OUT/ncu-$1-$2-$3-$4 --shapes $1 --tokens 8192 --routing $2 --precision w8a8 \
    --orders interleaved --cluster $3 --pair-share $4 --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$1-$2-$3-$4.txt 2>&1
  echo "rc=$?"; grep -E "dram__|lts__|gpu__time|sm__pipe" $OUT/ncu-$1-$2-$3-$4.txt
done
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
