#!/usr/bin/env bash
# s36 call 5: a Linear-2 tile's first stages load their weights before the row's readiness wait (the producer's change,
# against 85dd36e's kernel). 1. every MoE GPU test in its own process and compute-sanitizer memcheck / racecheck /
# synccheck (scripts/moe-device.sh) on the new build; 2. the new build (N) against main's (O) on W8A8 8K V4-Pro,
# V4-Flash, DeepSeek-V3 (both routings, Interleaved = what auto runs there), processes O N N O O N N O.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/bins.tar.xz -C /tmp
mv /tmp/bench_moe /tmp/bench_moe_main build/bench/moe/ && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.CtaPairsSingleRank' \
  OUT=$OUT bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el timing
run() {  # $1 tag, $2 binary
  timeout 120 build/bench/moe/$2 --out $OUT/$1 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$1.log 2>&1
  echo "$1 rc=$? $(grep -E '^deepseek' $OUT/$1.log | awk '{print substr($1,10), $3, $5, $10, $NF}' | tr '\n' ' ')"
}
i=0
for x in O N N O O N N O; do
  i=$((i + 1))
  if [ $x = O ]; then run O$i bench_moe_main; else run N$i bench_moe; fi
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
