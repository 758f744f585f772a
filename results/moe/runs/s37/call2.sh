#!/usr/bin/env bash
# s37 call 2: after call 1 (the weights before A in a block: 4-11 % slower; 2 A slots: 1.5x slower), the producer's
# two cursors with A first in each block again (one ring: B's bytes expected, A's arrive and loads, then B's loads).
# Builds: O = main's (11dd1f1), N = this session's sources at the default, P = the same with XSTAGE_MOE_A_PREFETCH=4
# (each full tile's A box 4 blocks ahead into L2: is A's latency what the stages wait for?).
# 1. the MoE GPU tests of N, compute-sanitizer (memcheck, racecheck, synccheck) on N (P: the harness's check);
# 2. W8A8 8K V4-Pro and V4-Flash, both routings, Interleaved, processes O N P P N O O N P P N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/bins.tar.xz -C /tmp
mv /tmp/bench_moe /tmp/bench_moe_main /tmp/bench_moe_pf build/bench/moe/
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests N
mkdir -p $OUT/testsN
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu \
  MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.CtaPairsSingleRank' OUT=$OUT/testsN bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el timing
run() {  # $1 tag, $2 binary
  timeout 120 build/bench/moe/$2 --out $OUT/$1 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$1.log 2>&1
  echo "$1 rc=$? $(grep -E '^deepseek' $OUT/$1.log | awk '{print substr($1,13), $3, $5, $10, $NF}' | tr '\n' ' ')"
}
i=0
for x in O N P P N O O N P P N O; do
  i=$((i + 1))
  case $x in O) run O$i bench_moe_main ;; N) run N$i bench_moe ;; P) run P$i bench_moe_pf ;; esac
done
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
