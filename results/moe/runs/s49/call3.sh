#!/usr/bin/env bash
# s49 call 3 (nvidia-h200): W4A8 eighth tiles (a lean-kernel tile of at most 16 tokens runs N = 16 RS batches).
#   build/s49c3.tar.xz: N = this build's stripped bench_moe, test_moe_layer_gpu, test_fp8_wgmma_gpu; O = bench_moe of
#   the same sources with -DXSTAGE_MOE_INT4_EIGHTH=0 (bench_moe_O).
#   1. every MoE layer and FP8 wgmma GPU test (the new W4A8EveryTileWidth among them);
#   2. compute-sanitizer memcheck, racecheck, synccheck on W4A8SingleRank and W4A8EveryTileWidth;
#   3. W4A8 at 2048 tokens, five shapes, both routings, P = 1, Interleaved, processes O N N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/s49c3.tar.xz -C /tmp
mv /tmp/bench_moe /tmp/bench_moe_O build/bench/moe/ && mv /tmp/test_moe_layer_gpu /tmp/test_fp8_wgmma_gpu build/tests/moe_gpu/
cp build/bench/moe/bench_moe build/bench/moe/bench_moe_N
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
O=$OUT/c3 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
MOE_SANITIZE=0 MOE_TEST_BINS="build/tests/moe_gpu/test_moe_layer_gpu build/tests/moe_gpu/test_fp8_wgmma_gpu" OUT=$O/tests \
  timeout 240 bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED" | head
grep -A3 "W4A8EveryTileWidth" $O/tests/moe-tests.log | head -8
el sanitizers
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 150 $SAN --tool $tool --error-exitcode 3 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EveryTileWidth' >> $O/sanitize.log 2>&1
  echo "$tool exit $?"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK" $O/sanitize.log | head
el W4A8
i=0
for x in O N N O; do
  i=$((i + 1))
  timeout 100 build/bench/moe/bench_moe_$x --out $O/w$x-$i --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
    --tokens 2048 --routing balanced,skewed --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
    --block-s 0.05 --warmup-s 0.03 > $O/w$x-$i.log 2>&1
  echo "$x-$i rc=$? $(grep -E '^[a-z]' $O/w$x-$i.log | grep -E ' 2048 ' | awk '{print substr($1,1,14), substr($3,1,4), $5, $NF}' | tr '\n' ' ')"
done
el done
cd $O && rm -f */blocks.json && tar czf ../call3.tgz * && cd .. && rm -rf c3
