#!/usr/bin/env bash
# s69 call 1 (H200 only; stops at once on any other card): the tile-packed W8A8 weights beside the row-major ones.
#  1. s68 call 8's bench: V4-Pro and V4-Flash at 8192 tokens, Interleaved, packed beside row-major in each process of
#     this tree (bench_moe --compare-packed), main d0d9743's build (bench_moe_main) between, processes N M M N N M M N.
#  2. Every shape at 8192 tokens, both routings, packed beside row-major, two processes (does the packing help beyond V4?).
# Carry build/s68e.tar.xz (stripped: this tree's libxstage_attention.so and bench_moe, d0d9743's bench_moe as
# bench_moe_main).   OUT=$OUT bash results/moe/runs/s69/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
# PARTS="1 2" by default; ANY_GPU=1 runs on a card other than an H200 too.
PARTS=${PARTS:-1 2}
[ "${ANY_GPU:-0}" = 1 ] || nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { nvidia-smi --query-gpu=name --format=csv,noheader; exit 3; }
B=build/pk68e && mkdir -p $B && { [ -f $B/bench_moe ] || tar xJf build/s68e.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O/w
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
C="--tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03"
Q="--shapes deepseek-v4-pro,deepseek-v4-flash $C"
i=0
[[ " $PARTS " == *" 1 "* ]] && for b in bench_moe bench_moe_main bench_moe_main bench_moe bench_moe bench_moe_main bench_moe_main bench_moe; do
  i=$((i + 1)); extra=""; [ $b = bench_moe ] && extra="--compare-packed"
  timeout 120 $B/$b $Q $extra --out $O/w/p$i > $O/w/p$i.log 2>&1
  echo "== process $i $b: rc=$?"
  [ -f $O/w/p$i/moe.csv ] && grep -E "fused_interleaved" $O/w/p$i/moe.csv | cut -d, -f1,7,10,11,14,16,19
done
[[ " $PARTS " == *" 2 "* ]] && for j in 1 2; do
  timeout 200 $B/bench_moe $C --compare-packed --out $O/w/a$j > $O/w/a$j.log 2>&1
  echo "== all shapes, process $j: rc=$?"
  [ -f $O/w/a$j/moe.csv ] && grep -E "fused_interleaved" $O/w/a$j/moe.csv | cut -d, -f1,7,10,11,14,16,19
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz $(ls -d p*/moe.csv a*/moe.csv 2>/dev/null) *.log *.txt 2>/dev/null)
rm -rf $O/w
