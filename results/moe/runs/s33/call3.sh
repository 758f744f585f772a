#!/usr/bin/env bash
# s33 call 3 (main's kernel; bench_moe carried as build/bins.tar.xz): the default (CTA pairs) on fewer CTAs, ncu on one
# fused launch as in call 2 (Interleaved, 8K W8A8, clocks not locked): V4-Pro skewed and V4-Flash balanced on 120 CTAs
# (what clusters of four get) and 100, beside 132 again: does the layer's time follow its SM count (per-SM bound) or
# its L2 traffic, and what did the clusters of four change at an equal SM count.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp bench_moe && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for t in "deepseek-v4-pro skewed" "deepseek-v4-flash balanced"; do for c in 132 120 100; do
  set -- $t
  el "ncu $1 $2 ctas $c"
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 1 --clock-control none \
    --metrics dram__bytes_read.sum,gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second \
    build/bench/moe/bench_moe --out $OUT/ncu-$1-$2-$c --shapes $1 --tokens 8192 --routing $2 --precision w8a8 \
    --orders interleaved --ctas $c --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$1-$2-$c.txt 2>&1
  echo "rc=$?"; grep -E "dram__|lts__|gpu__time|sm__cycles" $OUT/ncu-$1-$2-$c.txt
done; done
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
