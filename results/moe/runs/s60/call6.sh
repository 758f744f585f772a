#!/usr/bin/env bash
# s60 call 6 (nvidia-h200): auto's every-Linear-1-first rule as revised after calls 4-5 (taken at P = 1 where the
# simulator predicts it strictly faster than both plain orders) on points no rule has seen: routing seed 2 (new
# weights, activations and routings), DiT-MoE-XL at 1K / 4K / 16K and three shapes never timed (--custom: a
# Mixtral-8x7B-like layer 4096/14336/8/2, a DiT-B-like 768/3072/8/2 and a DiT-L-like 1536/6144/16/2), W8A8 and W4A8,
# both routings, every order in one process (Expert-Wave plain and lagged, Interleaved at the knee, every Linear-1 tile
# first). Carry build/s60b.tar.xz.
#   OUT=$OUT bash results/moe/runs/s60/call6.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk6 && tar xJf build/s60b.tar.xz -C build/pk6
mkdir -p build/bench/moe && cp build/pk6/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c6 && mkdir -p $O/runs
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for p in w8a8 w4a8; do
  left=$(( ${LIMIT:-330} - ($(date +%s) - T0) ))
  [ $left -gt 30 ] || { el "$p skipped"; continue; }
  timeout $left build/bench/moe/bench_moe --out $O/runs/$p --seed 2 --shapes dit-moe-xl,mixtral-like,dit-b-like,dit-l-like \
    --custom mixtral-like:4096:14336:8:2 --custom dit-b-like:768:3072:8:2 --custom dit-l-like:1536:6144:16:2 \
    --tokens 1024,4096,16384 --routing balanced,skewed --precision $p --orders wave,interleaved --compare-wave-lag \
    --compare-l1-first --worlds 1 --check-tokens 1 --block-s 0.04 --warmup-s 0.02 > $O/runs/$p.log 2>&1
  el "$p rc=$?"
done
# a lead for the next rule (not one auto follows): W4A8 on the other six shapes at 1K and 4K tokens, seed 2, where
# call 4 timed every Linear-1 tile first at 0.89-1.00x Interleaved at 2K (geomean 0.958) and the simulator ties the two
left=$(( ${W4_END:-540} - ($(date +%s) - T0) ))
if [ $left -gt 40 ]; then
  timeout $left build/bench/moe/bench_moe --out $O/runs/w4few --seed 2 \
    --shapes qwen3-30b-a3b,qwen3-235b-a22b,deepseek-v3,deepseek-v4-flash,deepseek-v4-pro,glm-flash --tokens 1024,4096 \
    --routing balanced,skewed --precision w4a8 --orders interleaved --compare-l1-first --worlds 1 --check-tokens 1 \
    --block-s 0.04 --warmup-s 0.02 > $O/runs/w4few.log 2>&1
  el "w4few rc=$?"
fi
cd $O && rm -f runs/*/blocks.json && tar czf ../c6.tgz . && cd .. && rm -rf $O
