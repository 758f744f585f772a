#!/usr/bin/env bash
# s44 call 1: a half tile's K loop with two scratches in turn (half_pipe_loop; XSTAGE_MOE_HALF_PIPE: 1 = the half
# Linear-1 tiles, 3 = also every one-batch Linear-2 loop) against main's kernel (O). build/var44.tar.xz: stripped
# bench_moe_O / _N1 / _N3 and N3's test_moe_layer_gpu (test_unfused_gpu from build/bins.tar.xz).
# 1. the MoE GPU tests of N3, compute-sanitizer (memcheck, racecheck, synccheck) on N3;
# 2. V4-Pro 2K on 32 CTAs (every tile a half tile), processes O N1 N3 N3 N1 O;
# 3. W8A8 8K V4-Pro and V4-Flash, both routings, Interleaved, processes O N1 N3 N3 N1 O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/var44.tar.xz -C /tmp
mv /tmp/bench_moe_O /tmp/bench_moe_N1 /tmp/bench_moe_N3 build/bench/moe/
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
for x in O N1 N3 N3 N1 O; do
  i=$((i + 1))
  timeout 120 build/bench/moe/bench_moe_$x --out $OUT/s$x-$i --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
    --precision w8a8 --orders interleaved --ctas 32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/s$x-$i.log 2>&1
  echo "2K/32 $x-$i rc=$? $(grep -E '^deepseek' $OUT/s$x-$i.log | awk '{print "fused", $5, $NF}')"
done
el big
i=0
for x in O N1 N3 N3 N1 O; do
  i=$((i + 1))
  timeout 150 build/bench/moe/bench_moe_$x --out $OUT/e$x-$i --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/e$x-$i.log 2>&1
  echo "8K $x-$i rc=$? $(grep -E '^deepseek' $OUT/e$x-$i.log | awk '{print substr($1,13), $3, $5, $10, $NF}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
