#!/usr/bin/env bash
# s37 call 4: after call 3 (a 500-cycle delay in the producer's reaction to a freed stage: 1.10x the time; 3 A slots
# instead of 4: 1.13x), a stage's round trip is what the 8K layers wait for. E = main's kernel with every K block's
# stage released as soon as the block's last batch is done (XSTAGE_MOE_EARLY_ALL=1), instead of in the shadow of the
# next block's first batch (after its full wait and issue). O = main's (11dd1f1).
# 1. the MoE GPU tests of E, compute-sanitizer (memcheck, racecheck, synccheck) on E;
# 2. W8A8 8K V4-Pro, V4-Flash, DeepSeek-V3, both routings, Interleaved, processes O E E O O E E O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/bins.tar.xz -C /tmp
mv /tmp/bench_moe_main /tmp/bench_moe_e build/bench/moe/ && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests E
mkdir -p $OUT/testsE
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu \
  MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.CtaPairsSingleRank' OUT=$OUT/testsE bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el timing
run() {  # $1 tag, $2 binary
  timeout 120 build/bench/moe/$2 --out $OUT/$1 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$1.log 2>&1
  echo "$1 rc=$? $(grep -E '^deepseek' $OUT/$1.log | awk '{print substr($1,10), $3, $5, $10, $NF}' | tr '\n' ' ')"
}
i=0
for x in O E E O O E E O; do
  i=$((i + 1))
  case $x in O) run O$i bench_moe_main ;; E) run E$i bench_moe_e ;; esac
done
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
