#!/usr/bin/env bash
# s49 call 6 (nvidia-h200): call 5 continued on the shapes where weight-sharing pairs beat pair_share auto's A-sharing
# ones at 8192 tokens (V4-Flash, Qwen3-235B; GLM-Flash mixed): W8A8 at 2048 and 32768 tokens, W4A8 at 8192, both
# routings, Interleaved, --compare-pair-share --compare-control. build/s49c5.tar.xz: main's stripped bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s49c5.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
O=$OUT/c6 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
S=deepseek-v4-flash,glm-flash,qwen3-235b-a22b
for run in "w8 w8a8 2048,32768" "w4 w4a8 8192"; do
  set -- $run
  el $1
  timeout 300 build/bench/moe/bench_moe --out $O/$1 --shapes $S --tokens $3 --routing balanced,skewed --precision $2 \
    --orders interleaved --worlds 1 --check-tokens 1 --compare-pair-share --compare-control --block-s 0.05 --warmup-s 0.03 \
    --rounds 2 > $O/$1.log 2>&1
  echo "rc=$?"; grep -E "^configs" $O/$1.log
  cut -d, -f1,6,7,10,11,16,17 $O/$1/moe.csv | grep -E "_ctl|_s[afw]"
done
el done
cd $O && rm -f */blocks.json && tar czf ../call6.tgz * && cd .. && rm -rf c6
