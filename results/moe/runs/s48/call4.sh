#!/usr/bin/env bash
# s48 call 4 (nvidia-h200-x2): real ranks after the fix (MoeWorkspace::poison collective in a real team), build N of
# call 3 (8e1fdc9 + W4A8 quarter tiles; build/s48c3.tar.xz).
#   1. every MoE GPU test (MoeLayerReal.TwoRanksEqualOneGpuRunBitForBit now runs: two real ranks, W8A8 and W4A8, both
#      orders, 3 calls with back-to-back launches, each rank's rows against a one-GPU run of the global batch);
#   2. the call-1 sanity run (Qwen3-30B, V4-Flash, 2048 tokens per rank, both precisions and orders, with the P = 1
#      twin check) and memcheck on both ranks of a small layer;
#   3. scripts/moe-study.sh with RANKS=2, steps in STUDY_STEPS (default w8).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu build/src/cli && tar xJf build/s48c3.tar.xz -C /tmp
mv /tmp/bench_moe_N /tmp/bench_moe_Q0 build/bench/moe/ && cp build/bench/moe/bench_moe_N build/bench/moe/bench_moe
mv /tmp/xstage build/src/cli/
mv /tmp/test_moe_layer_gpu /tmp/test_fp8_wgmma_gpu /tmp/test_unfused_gpu /tmp/test_unfused_ep_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
X=build/src/cli/xstage; B=build/bench/moe/bench_moe
if [ "${TESTS:-1}" = 1 ]; then
  el tests
  mkdir -p $OUT/tests
  MOE_SANITIZE=0 MOE_TEST_BINS="build/tests/moe_gpu/test_moe_layer_gpu build/tests/moe_gpu/test_fp8_wgmma_gpu build/tests/moe_gpu/test_unfused_gpu build/tests/moe_gpu/test_unfused_ep_gpu" \
    OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
  grep -E "^rank [01] of [12]" $OUT/tests/moe-tests.log | head -30
fi
if [ "${SANITY:-1}" = 1 ]; then
  el sanity
  $X launch -n 2 --timeout 150 -- $B --out $OUT/sanity --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 2048 \
    --precision w8a8,w4a8 --orders wave,interleaved --check-tokens 4 --no-time > $OUT/sanity.log 2>&1
  echo "sanity rc=$?"; grep -vE "^\s+(trace|emulated)" $OUT/sanity.log | head -30
  el memcheck
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
  $X launch -n 2 --timeout 150 -- $SAN --tool memcheck --error-exitcode 3 $B --out $OUT/san --custom tiny:512:256:16:4 \
    --tokens 256 --precision w8a8,w4a8 --orders wave,interleaved --check-tokens 2 --no-time > $OUT/memcheck.log 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|tiny|real ranks" $OUT/memcheck.log | head -12
  echo "device access errors: $(grep -cE "Invalid (__global__|__shared__|__local__)|out of bounds|misaligned" $OUT/memcheck.log)"
fi
for st in ${STUDY_STEPS:-w8}; do
  el "$st"
  OUT=$OUT/study RANKS=2 LAUNCH_TIMEOUT=${STEP_TIMEOUT:-330} STEPS=$st bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator|^# |DIFFER|error" $OUT/study.log
el done
cd $OUT && rm -f */blocks.json */*/blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
