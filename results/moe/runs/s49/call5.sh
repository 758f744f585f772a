#!/usr/bin/env bash
# s49 call 5 (nvidia-h200): the CTA pairs' sharing modes re-measured on main's kernel at 8192 tokens (pair_share auto's
# threshold, weights shared where an expert's W1 exceeds 0.3 of the L2, was set in s28 on an older kernel), W8A8, five
# shapes x both routings, Interleaved, with the identical-work control beside them (bench_moe --compare-pair-share
# --compare-control). build/s49c5.tar.xz: main's stripped bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s49c5.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
O=$OUT/c5 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el pair-share
timeout 420 build/bench/moe/bench_moe --out $O/ps --shapes deepseek-v4-flash,glm-flash,deepseek-v4-pro,deepseek-v3,qwen3-235b-a22b \
  --tokens 8192 --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 \
  --compare-pair-share --compare-control --block-s 0.05 --warmup-s 0.03 --rounds 2 > $O/ps.log 2>&1
echo "rc=$?"; grep -E "^[a-z]|_s[afw]|_ctl|ratio" $O/ps.log | head -60
el done
cd $O && rm -f */blocks.json && tar czf ../call5.tgz * && cd .. && rm -rf c5
