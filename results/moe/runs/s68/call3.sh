#!/usr/bin/env bash
# s68 call 3: which register split the tile-packed weights should run with, and what either costs the row-major default.
# Carry build/s68b.tar.xz: bench_moe (main 46261ed: W8A8 producer 72 / consumers 216 registers), bench_moe_b (the same
# sources with main's 56 / 224), bench_moe_main (main d0d9743), stripped. Processes N B M M B N, twice; N and B also
# time the packed layout beside the row-major one in the same process (--compare-packed).
#   OUT=$OUT bash results/moe/runs/s68/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk68b && mkdir -p $B && { [ -x $B/bench_moe_b ] || tar xJf build/s68b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a $O/gpu.txt
Q="--shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03"
i=0
for b in bench_moe bench_moe_b bench_moe_main bench_moe_main bench_moe_b bench_moe bench_moe bench_moe_b bench_moe_main bench_moe_main bench_moe_b bench_moe; do
  i=$((i + 1)); extra=""; [ $b != bench_moe_main ] && extra="--compare-packed"
  timeout 120 $B/$b $Q $extra --out $O/p$i > $O/p$i.log 2>&1
  rc=$?
  echo "== process $i $b: rc=$rc"
  [ -f $O/p$i/moe.csv ] && grep -E "fused_interleaved" $O/p$i/moe.csv | cut -d, -f1,7,10,11,14,16 | sed "s/^/$b,/"
done | tee $O/table.txt
