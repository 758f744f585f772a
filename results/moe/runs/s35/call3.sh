#!/usr/bin/env bash
# s35 call 3 (a diagnostic build, not committed: null-half-a-debug.patch plus two more bits of XSTAGE_DEBUG_NULL_HALF,
# null-half-all-debug.patch): bit 2 (4) = a half Linear-1 tile that loads its own weights loads no weight boxes; bit 3
# (8) = a half Linear-2 tile that does not share weights loads neither its A (h) box nor its weights (the consumers
# still multiply what the stage holds). What the balanced layers' tails (an expert's last row of at most 64 tokens)
# cost: with A-sharing pairs everywhere (--pair-share 1: the tails load their own weights, so the switch reaches them)
# 0 against 15, beside the default pairs (0), V4-Pro and V4-Flash balanced at 8K, alternating processes, two rounds.
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
  run k8_def_$rep 0 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing balanced
  for v in 0 15; do
    run k8_ps1_n${v}_$rep $v --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing balanced --pair-share 1
  done
done
unset XSTAGE_DEBUG_NULL_HALF
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
