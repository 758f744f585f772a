#!/usr/bin/env bash
# s47 call 4: W4A8 with 5 pipeline stages (the token box in the stage's 32 KB B buffer beside the int4 blocks) and a half
# tile's two batches issued together (N), against the same with 3 stages (N3, -DXSTAGE_MOE_INT4_STAGES=3) and the
# committed kernel 4972967 (C: 3 stages, half-tile batches one at a time).
# build/s47c4.tar.xz: stripped bench_moe_C, bench_moe_N3, bench_moe_N and N's test_moe_layer_gpu, test_fp8_wgmma_gpu,
# test_unfused_gpu.
# 1. N's MoE GPU tests; compute-sanitizer (memcheck, racecheck, synccheck) on W4A8SingleRank,
#    W4A8EmptyExpertsAndRepeatedCalls (half tiles, pairs), PackInt4WeightsOnDevice;
# 2. W4A8 V4-Pro, V4-Flash, DeepSeek-V3, Qwen3-30B at 2048, 8192, 32768 tokens, balanced, Interleaved, processes
#    C N3 N N N3 C.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/s47c4.tar.xz -C /tmp
mv /tmp/bench_moe_C /tmp/bench_moe_N3 /tmp/bench_moe_N build/bench/moe/
mv /tmp/test_moe_layer_gpu /tmp/test_fp8_wgmma_gpu /tmp/test_unfused_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
mkdir -p $OUT/tests
MOE_SAN_FILTER='MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls:MoeLayerGpu.PackInt4WeightsOnDevice' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el W4A8
i=0
for x in C N3 N N N3 C; do
  i=$((i + 1))
  timeout 75 build/bench/moe/bench_moe_$x --out $OUT/w$x-$i --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,qwen3-30b-a3b \
    --tokens 2048,8192,32768 --routing balanced --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
    --block-s 0.05 --warmup-s 0.03 > $OUT/w$x-$i.log 2>&1
  echo "$x-$i rc=$? $(grep -E '^[a-z]' $OUT/w$x-$i.log | grep -E ' (2048|8192|32768) ' | awk '{print substr($1,1,14), $2, $5}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
