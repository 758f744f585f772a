#!/usr/bin/env bash
# s37 call 3: how much the 4th A slot is worth with the weights kept at 4 stages (after calls 1-2: 2 A slots 1.5x slower).
# Builds: O = main's (11dd1f1), N = the two-cursor producer at the default (one ring of 4), A = the same with
# XSTAGE_MOE_A_STAGES=3 (3 A slots, 4 weight stages: the weights issued 1 block ahead of A). No tests (N is call 2's binary; A: the harness's check).
# D = N with a spin of 500 cycles after each of the producer's empty-barrier waits (XSTAGE_MOE_PRODUCER_DELAY=500):
# how much the layer's time follows the producer's reaction to a freed stage (call 2's N was 4 % slower than O).
# W8A8 8K V4-Pro and V4-Flash, both routings, Interleaved, processes O N A D D A N O O N A D D A N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp
mv /tmp/bench_moe /tmp/bench_moe_main /tmp/bench_moe_a3 /tmp/bench_moe_d500 build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el timing
run() {  # $1 tag, $2 binary
  timeout 120 build/bench/moe/$2 --out $OUT/$1 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$1.log 2>&1
  echo "$1 rc=$? $(grep -E '^deepseek' $OUT/$1.log | awk '{print substr($1,13), $3, $5, $10, $NF}' | tr '\n' ' ')"
}
i=0
for x in O N A D D A N O O N A D D A N O; do
  i=$((i + 1))
  case $x in O) run O$i bench_moe_main ;; N) run N$i bench_moe ;; A) run A$i bench_moe_a3 ;; D) run D$i bench_moe_d500 ;; esac
done
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
