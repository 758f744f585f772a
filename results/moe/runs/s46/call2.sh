#!/usr/bin/env bash
# s46 call 2: W4A8 in the packed sign-magnitude int4 form (expanded by a mask and a rotation to e4m3 subnormals, the
# 2^9 folded into the row scales) as N against main's two's complement form (O).
# build/w4s46.tar.xz: stripped bench_moe_O (7cc9d6a), bench_moe_N and N's test_moe_layer_gpu, test_unfused_gpu,
# mainloop_probe.
# 1. N's MoE GPU tests; compute-sanitizer (memcheck, racecheck, synccheck) on SingleRank, W4A8SingleRank,
#    CtaPairsSingleRank, Int4ToE4m3Exact, PackInt4WeightsOnDevice;
# 2. N's probe rows (l1-w4*, l1-w4s*, l1-w4cs*) on 132 CTAs from HBM and from L2, 33 from HBM;
# 3. W4A8 at 2048 and 8192 tokens, V4-Pro, V4-Flash, DeepSeek-V3, Qwen3-235B, balanced, Interleaved, processes O N N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/w4s46.tar.xz -C /tmp
mv /tmp/bench_moe_O /tmp/bench_moe_N /tmp/mainloop_probe build/bench/moe/
mv /tmp/test_moe_layer_gpu /tmp/test_unfused_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el probe
for run in "H132 --src-mb 16384" "L132 --src-mb 16" "H33 --src-mb 16384 --ctas 33"; do
  set -- $run; n=$1; shift
  timeout 150 build/bench/moe/mainloop_probe --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "$n rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4" $OUT/$n.log
done
el tests
mkdir -p $OUT/tests
MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.CtaPairsSingleRank:MoeLayerGpu.Int4ToE4m3Exact:MoeLayerGpu.PackInt4WeightsOnDevice' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
grep -E "Int4ToE4m3Exact|PackInt4|W4A8" -A3 $OUT/tests/moe-tests.log | head -30
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
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
