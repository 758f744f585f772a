#!/usr/bin/env bash
# s44 call 7: a stage's weight loads issued before its A box and A scales (N; call 6 measured the TMA unit taking a
# stage's loads one after the other: ~230 cycles for A's box, ~100 for its scales, ~400 for the weights'), against
# main's kernel (O). build/wf44.tar.xz: stripped bench_moe_O, bench_moe_N and N's test_moe_layer_gpu, test_unfused_gpu.
# 1. the MoE GPU tests of N, compute-sanitizer (memcheck, racecheck, synccheck) on N;
# 2. V4-Pro 2K on 32 CTAs, processes O N N O;
# 3. W8A8 8K, all seven shapes, both routings, Interleaved, processes O N N O O N N O;
# 4. W8A8 32K, V4-Pro and V4-Flash, both routings, processes O N N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/wf44.tar.xz -C /tmp
mv /tmp/bench_moe_O /tmp/bench_moe_N build/bench/moe/
mv /tmp/test_moe_layer_gpu /tmp/test_unfused_gpu build/tests/moe_gpu/
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
for x in O N N O; do
  i=$((i + 1))
  timeout 60 build/bench/moe/bench_moe_$x --out $OUT/s$x-$i --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
    --precision w8a8 --orders interleaved --ctas 32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/s$x-$i.log 2>&1
  echo "2K/32 $x-$i rc=$? $(grep -E '^deepseek' $OUT/s$x-$i.log | awk '{print "fused", $5, $NF}')"
done
el 8K
i=0
for x in O N N O O N N O; do
  i=$((i + 1))
  timeout 100 build/bench/moe/bench_moe_$x --out $OUT/e$x-$i --shapes all --tokens 8192 --routing balanced,skewed \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 2 --block-s 0.05 --warmup-s 0.03 > $OUT/e$x-$i.log 2>&1
  echo "8K $x-$i rc=$? $(grep -E '^[a-z]' $OUT/e$x-$i.log | grep 8192 | awk '{print $1, substr($3,1,3), $5}' | tr '\n' ' ')"
done
el 32K
i=0
for x in O N N O; do
  i=$((i + 1))
  timeout 100 build/bench/moe/bench_moe_$x --out $OUT/f$x-$i --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 32768 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 2 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/f$x-$i.log 2>&1
  echo "32K $x-$i rc=$? $(grep -E '^deepseek' $OUT/f$x-$i.log | awk '{print substr($1,13), substr($3,1,3), $5, $10}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
