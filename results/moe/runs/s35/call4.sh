#!/usr/bin/env bash
# s35 call 4 (a diagnostic build, not committed: rotate-k-debug.patch, against 7fb16c7: null-half-all-debug.patch and
# three more bits of XSTAGE_DEBUG_NULL_HALF, W8A8 only): 16 = a half Linear-1 tile that loads its own weights walks its
# K blocks from block 7 (n/2) mod KB instead of 0 (n: its N tile; a pair's two CTAs alike); 32 = every Linear-1 tile
# does; 64 = every Linear-2 tile does, from 5 (n/2) mod KB. Producer and consumers (the weight block scales) rotate
# alike, so the results stay correct (another fp32 summation order); bytes and loads are unchanged. Question: do the
# CTAs that walk one row's N tiles side by side, each at the same K offset of weight rows 7168 B apart, crowd the same
# HBM channels? Values 0 / 16 / 32 / 96, alternating processes, two rounds, the four V4 8K layers (Interleaved, lean).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp bench_moe && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
B=build/bench/moe/bench_moe
run() {  # $1 tag, $2 XSTAGE_DEBUG_NULL_HALF, rest: bench args
  local tag=$1 v=$2; shift 2
  export XSTAGE_DEBUG_NULL_HALF=$v
  timeout 90 $B --out $OUT/$tag "$@" --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 \
    --block-s 0.1 --warmup-s 0.05 > $OUT/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^deepseek' $OUT/$tag.log | awk '{print $1, $3, $5}' | tr '\n' ' ')"
}
for rep in a b; do
  for v in 0 16 32 96; do
    run k8_r${v}_$rep $v --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing skewed,balanced
  done
done
unset XSTAGE_DEBUG_NULL_HALF
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
