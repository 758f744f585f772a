#!/usr/bin/env bash
# s45 call 6: the int4 -> e4m3 expansion with one mask and one pick per 32-bit word (int4x8_to_e4m3x8) instead of per
# 16 bits, as N against main's (O). build/w4x45.tar.xz: stripped bench_moe_O, bench_moe_N and N's
# test_moe_layer_gpu (with the new exhaustive test Int4ToE4m3Exact), test_unfused_gpu, mainloop_probe.
# 1. N's MoE GPU tests, compute-sanitizer (memcheck, racecheck, synccheck) on SingleRank, W4A8SingleRank, CtaPairsSingleRank;
# 2. N's probe rows (l1-w4*: the expansion's rate) on 132 CTAs from HBM and L2;
# 3. W4A8 at 2048 and 8192 tokens, V4-Pro, V4-Flash, DeepSeek-V3, Qwen3-235B, balanced, Interleaved, processes O N N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/w4x45.tar.xz -C /tmp
mv /tmp/bench_moe_O /tmp/bench_moe_N /tmp/mainloop_probe build/bench/moe/
mv /tmp/test_moe_layer_gpu /tmp/test_unfused_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
mkdir -p $OUT/tests
MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.CtaPairsSingleRank' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
grep -E "Int4ToE4m3Exact|W4A8" $OUT/tests/moe-tests.log | head
el probe
for run in "H132 --src-mb 16384" "L132 --src-mb 16"; do
  set -- $run; n=$1; shift
  timeout 150 build/bench/moe/mainloop_probe --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "$n rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4" $OUT/$n.log
done
el W4A8
i=0
for x in O N N O; do
  i=$((i + 1))
  timeout 140 build/bench/moe/bench_moe_$x --out $OUT/w$x-$i --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,qwen3-235b-a22b \
    --tokens 2048,8192 --routing balanced --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
    --block-s 0.05 --warmup-s 0.03 > $OUT/w$x-$i.log 2>&1
  echo "$x-$i rc=$? $(grep -E '^[a-z]' $OUT/w$x-$i.log | grep -E ' (2048|8192) ' | awk '{print substr($1,1,14), $2, $5}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
