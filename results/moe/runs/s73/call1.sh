#!/usr/bin/env bash
# s73 call 1. Carry build/s71a.tar.xz and build/s70b.tar.xz (main's MoE kernel, d0d9743's code = main's).
#   OUT=$OUT bash results/moe/runs/s73/call1.sh
# On an H200: session 71's `h200` step first (s70's calls 6 and 3 there: the time against DRAM bytes, the L2 reading).
# On any card: the traced kernel's per-tile records of the four V4 W8A8 8K layers (Interleaved, auto pairs), read by
# tile_ends.py: the CTAs' idle time at the layer's end (what a dynamic tile claim could give) and the SM-time by kind.
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/s73 && mkdir -p $O/w
start=$(date +%s)
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  OUT=$O timeout -k 10 440 bash results/moe/runs/s71/call1.sh h200; echo "== s71 call1 h200 rc=$?"
  for d in $O/c1/w $O/c1/c6/w $O/c1/c3/w; do [ -d $d ] && (cd $d/.. && tar czf partial.tgz w && rm -rf w); done
fi
for shape in deepseek-v4-pro:7168:3072 deepseek-v4-flash:4096:2048; do
  IFS=: read -r s h i <<< "$shape"
  for routing in balanced skewed; do
    [ $(( $(date +%s) - start )) -gt 500 ] && { echo "== $s $routing: out of time, skipped"; continue; }
    timeout 60 $B/bench_moe --shapes $s --tokens 8192 --routing $routing --precision w8a8 --orders interleaved \
      --worlds 1 --check-tokens 1 --no-time --trace-csv $O/w/tiles_${s}_$routing.csv --out $O/w/b_${s}_$routing \
      > $O/w/${s}_$routing.log 2>&1
    echo "== $s $routing rc=$?"
    python3 results/moe/runs/s73/tile_ends.py $h $i $O/w/tiles_${s}_$routing.csv
    gzip -f $O/w/tiles_${s}_$routing.csv
  done
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/b_*/blocks.json
(cd $O/w && tar czf ../traces.tgz * 2>/dev/null)
rm -rf $O/w
