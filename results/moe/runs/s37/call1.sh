#!/usr/bin/env bash
# s37 call 1: the producer as two cursors (weights run ahead of A; docs/MOE.md "Session 37").
# Builds: O = main's (11dd1f1: one ring of 4 x 48 KB), N = this session's sources at the default (one ring of 4:
# the B cursor issues block j's weights, then the A cursor its A), S = the same sources with XSTAGE_MOE_STAGES=5,
# XSTAGE_MOE_A_STAGES=2 (5 weight stages of 32 KB, 2 A slots of 16 KB: the weights issued 3 K blocks ahead of A).
# 1. the MoE GPU tests of S and N, compute-sanitizer (memcheck, racecheck, synccheck) on S;
# 2. W8A8 8K V4-Pro and V4-Flash, both routings, Interleaved, processes O N S S N O O N S S N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu build-s/tests/moe_gpu && tar xJf build/bins.tar.xz -C /tmp
mv /tmp/bench_moe /tmp/bench_moe_main /tmp/bench_moe_s52 build/bench/moe/
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/ && mv /tmp/test_moe_layer_gpu_s52 build-s/tests/moe_gpu/test_moe_layer_gpu
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests S
mkdir -p $OUT/testsS $OUT/testsN
XSTAGE_BUILD_DIR=build-s MOE_TEST_BINS=build-s/tests/moe_gpu/test_moe_layer_gpu \
  MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.CtaPairsSingleRank' OUT=$OUT/testsS bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el tests N
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SANITIZE=0 \
  OUT=$OUT/testsN bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el timing
run() {  # $1 tag, $2 binary
  timeout 120 build/bench/moe/$2 --out $OUT/$1 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$1.log 2>&1
  echo "$1 rc=$? $(grep -E '^deepseek' $OUT/$1.log | awk '{print substr($1,13), $3, $5, $10, $NF}' | tr '\n' ' ')"
}
i=0
for x in O N S S N O O N S S N O; do
  i=$((i + 1))
  case $x in O) run O$i bench_moe_main ;; N) run N$i bench_moe ;; S) run S$i bench_moe_s52 ;; esac
done
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
