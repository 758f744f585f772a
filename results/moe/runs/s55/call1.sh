#!/usr/bin/env bash
# s55 call 1 (nvidia-h200): measurement only, main's kernel (e678e96). DiT-MoE-XL, the project's own model:
# (a) lagged Expert-Wave waves with auto's 128-column Linear-2 tiles beside the ragged 256-column ones
#     (--wave-lag 1 --compare-l2-cols: fused_wave beside fused_wave_w), 1K-32K tokens, W8A8 and W4A8, both routings:
#     s54 measured 256 / 128 only on plain waves, whose Linear-2 first-stage wait the lag removes;
# (b) the traced kernel, lagged, at 2K and 8K (every tile: trace CSV) to see where a short layer's time goes.
# build/s55c1.tar.xz: bench_moe and test_moe_layer_gpu, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s55c1.tar.xz -C build/pk
mkdir -p build/bench/moe && mv build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O/runs
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
row() { awk -F, 'NR>1 && $10 ~ /fused_wave/ {printf "%-11s %-6s %-9s %6s %-14s %8.3f %6.3f %s\n",$1,$6,$7,$5,$10,$11,$16,$17}' $1; }
for p in w8a8 w4a8; do
  timeout 170 build/bench/moe/bench_moe --out $O/runs/$p --shapes dit-moe-xl --tokens 1024,2048,4096,8192,16384,32768 \
    --routing balanced,skewed --precision $p --orders wave --worlds 1 --check-tokens 1 --wave-lag 1 --compare-l2-cols \
    --block-s 0.04 --warmup-s 0.02 > $O/runs/$p.log 2>&1
  echo "$p rc=$?"; head -1 $O/runs/$p/moe.csv | cut -c1-400; row $O/runs/$p/moe.csv
done
for t in 2048 8192; do
  timeout 60 build/bench/moe/bench_moe --out $O/runs/tr$t --shapes dit-moe-xl --tokens $t --routing balanced \
    --precision w8a8 --orders wave --worlds 1 --check-tokens 1 --wave-lag 1 --trace --trace-csv $O/runs/tr$t/tiles.csv \
    --block-s 0.05 --warmup-s 0.03 > $O/runs/tr$t.log 2>&1
  echo "trace $t rc=$?"; cat $O/runs/tr$t/trace_summary.csv
done
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
