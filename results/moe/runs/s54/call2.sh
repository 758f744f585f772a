#!/usr/bin/env bash
# s54 call 2 (nvidia-h200): where do ragged 256-column Linear-2 tiles pay on DiT-MoE-XL (hidden 1152)? Call 1: slower
# at 2K / 8K (1.1-1.3x the time of 128 columns), faster at 32K W8A8 Expert-Wave (0.93x). Token counts between and
# beyond, Expert-Wave only (auto's order there), 256 beside 128 in one process, W8A8 and W4A8, both routings.
# Same binaries as call 1 (build/s54c1.tar.xz).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s54c1.tar.xz -C build/pk
mkdir -p build/bench/moe && mv build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c2 && mkdir -p $O/runs
for p in w8a8 w4a8; do
  timeout 250 build/bench/moe/bench_moe --out $O/runs/$p --shapes dit-moe-xl --tokens 4096,12288,16384,24576,49152 \
    --routing balanced,skewed --precision $p --orders wave --worlds 1 --check-tokens 1 --compare-l2-cols \
    --block-s 0.05 --warmup-s 0.03 > $O/runs/$p.log 2>&1
  echo "$p rc=$?"
  awk -F, 'NR>1 && $10 ~ /fused_wave/ {printf "%-6s %-9s %-16s %8.3f %6.3f %s\n",$6,$7,$10,$11,$16,$17}' $O/runs/$p/moe.csv
done
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
