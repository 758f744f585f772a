#!/usr/bin/env bash
# s70 call 9: the guess of the notebook's "Session 70" (why row groups' pairs miss each other's weight tiles): how far
# apart in time two weight-sharing pairs start the same weight tile (expert, kind, N tile) of different row pairs. The
# traced kernel's per-tile records (bench_moe --trace-csv: each tile's CTA, expert, row, N tile and mainloop start) on
# skewed V4-Pro 8K for main's order, whole-expert row groups (call 7's build, group_rows 2) and groups of 4 rows (call
# 8's build); results/moe/runs/s70/tile_lags.py reads them. Any card. Carry build/s70b.tar.xz, s70c.tar.xz, s70d.tar.xz.
#   OUT=$OUT bash results/moe/runs/s70/call9.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
{ [ -x $B/bench_moe_rg ] || tar xJf build/s70c.tar.xz -C $B; }
{ [ -x $B/bench_moe_rgc ] || tar xJf build/s70d.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c9 && mkdir -p $O/w
Q="--shapes deepseek-v4-pro --tokens 8192 --routing skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-time"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for cfg in bench_moe:0 bench_moe_rg:2 bench_moe_rgc:4; do
  IFS=: read -r bin gr <<< "$cfg"; extra=""; [ $bin != bench_moe ] && extra="--group-rows $gr"
  timeout 200 $B/$bin $Q $extra --trace-csv $O/w/tiles_$bin.csv --out $O/w/b_$bin > $O/w/$bin.log 2>&1
  echo "== $bin group_rows $gr: rc=$? $(wc -l < $O/w/tiles_$bin.csv) tile records"
  python3 results/moe/runs/s70/tile_lags.py $O/w/tiles_$bin.csv
  gzip $O/w/tiles_$bin.csv
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/b_*/blocks.json
(cd $O/w && tar czf ../c9.tgz * 2>/dev/null)
rm -rf $O/w
