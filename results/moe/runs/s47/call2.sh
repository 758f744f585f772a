#!/usr/bin/env bash
# s47 call 2: W4A8 as swapped tiles (int4 weights in the fragment layout, expanded in registers as wgmma's A operand,
# the tokens as B; no e4m3 copy) as N against main 63f3422's in-kernel e4m3 expansion (O).
# build/s47c2.tar.xz: stripped bench_moe_O (63f3422), bench_moe_N and N's test_moe_layer_gpu, test_fp8_wgmma_gpu,
# test_unfused_gpu.
# 1. N's MoE GPU tests; compute-sanitizer (memcheck, racecheck, synccheck) on SingleRank, W4A8SingleRank,
#    PackInt4WeightsOnDevice;
#    (call 1's N loaded the weight blocks by non-tensor bulk copies, which racecheck reported against the consumers'
#    reads; this N loads them by TMA through 2-d maps of the layout as 256-byte rows)
# 2. W4A8 DeepSeek-V3, Qwen3-235B, Qwen3-30B, GLM-Flash, DiT-MoE-XL at 2048, 8192, 32768 tokens, balanced,
#    Interleaved, processes O N N O (call 1 ran the two V4 layers).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/s47c2.tar.xz -C /tmp
mv /tmp/bench_moe_O /tmp/bench_moe_N build/bench/moe/
mv /tmp/test_moe_layer_gpu /tmp/test_fp8_wgmma_gpu /tmp/test_unfused_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
mkdir -p $OUT/tests
MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.PackInt4WeightsOnDevice' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
grep -E "W4A8|Int4|Pack" -A3 $OUT/tests/moe-tests.log | head -40
el W4A8
i=0
for x in O N N O; do
  i=$((i + 1))
  timeout 120 build/bench/moe/bench_moe_$x --out $OUT/w$x-$i --shapes deepseek-v3,qwen3-235b-a22b,qwen3-30b-a3b,glm-flash,dit-moe-xl \
    --tokens 2048,8192,32768 --routing balanced --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
    --block-s 0.05 --warmup-s 0.03 > $OUT/w$x-$i.log 2>&1
  echo "$x-$i rc=$? $(grep -E '^[a-z]' $OUT/w$x-$i.log | grep -E ' (2048|8192|32768) ' | awk '{print substr($1,1,14), $2, $5}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
