#!/usr/bin/env bash
# s43 call 7: every promotion as an explicit fmaf (N) against main's kernel (O). Call 6's ncu sampling found the half
# tiles' promotion compiled as FMUL + FADD (the sum sunk into the join of l1_mainloop's paths).
# 1. the MoE GPU tests of N, compute-sanitizer (memcheck, racecheck, synccheck) on N;
# 2. V4-Pro 2K on 32 CTAs (every tile a half tile), processes O N N O O N N O;
# 3. W8A8 8K V4-Pro and V4-Flash, both routings, Interleaved, processes O N N O O N N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/fma43.tar.xz -C /tmp
mv /tmp/bench_moe_main /tmp/bench_moe_new build/bench/moe/ && mv /tmp/test_moe_layer_gpu /tmp/test_unfused_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
mkdir -p $OUT/tests
MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.CtaPairsSingleRank' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el small
i=0
for x in O N N O O N N O; do
  i=$((i + 1)); b=$([ $x = O ] && echo bench_moe_main || echo bench_moe_new)
  timeout 120 build/bench/moe/$b --out $OUT/s$x$i --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
    --precision w8a8 --orders interleaved --ctas 32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/s$x$i.log 2>&1
  echo "2K/32 $x$i rc=$? $(grep -E '^deepseek' $OUT/s$x$i.log | awk '{print "fused", $5, $NF}')"
done
el big
i=0
for x in O N N O O N N O; do
  i=$((i + 1)); b=$([ $x = O ] && echo bench_moe_main || echo bench_moe_new)
  timeout 150 build/bench/moe/$b --out $OUT/e$x$i --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/e$x$i.log 2>&1
  echo "8K $x$i rc=$? $(grep -E '^deepseek' $OUT/e$x$i.log | awk '{print substr($1,13), $3, $5, $10, $NF}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
