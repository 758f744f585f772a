#!/usr/bin/env bash
# s47 call 6: the W4A8 GPU tests of c46be36 (5 stages) with memcheck, racecheck, synccheck on W4A8SingleRank and
# W4A8EmptyExpertsAndRepeatedCalls, the FP8 wgmma arithmetic (test_fp8_wgmma_gpu), then
# the table of record on this build (W4A8 as transposed tiles, 5 stages): STEPS="w8 w4 merge emu" of scripts/moe-study.sh (84 points at P = 1, both orders,
# emulated P = 2, 4, 8 at 2048 tokens; then emulated P = 2, 4, 8 at 8192 and 32768 tokens, correctness only).
# build/s47c6.tar.xz: this build's stripped bench_moe, test_moe_layer_gpu and test_fp8_wgmma_gpu.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/s47c6.tar.xz -C /tmp
mv /tmp/bench_moe build/bench/moe/ && mv /tmp/test_fp8_wgmma_gpu /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/tests
MOE_TESTS='W4A8|Int4|Pack|HalfAndFull|PairShare' MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu \
  MOE_SAN_FILTER='MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
build/tests/moe_gpu/test_fp8_wgmma_gpu > $OUT/wgmma.log 2>&1; echo "wgmma test rc=$?"
grep -E "exact|OK|FAIL|Failure|expected" $OUT/wgmma.log | head -20
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/moe_gpu/test_fp8_wgmma_gpu > $OUT/wgmma_memcheck.log 2>&1
echo "memcheck rc=$?"; grep "ERROR SUMMARY" $OUT/wgmma_memcheck.log
for st in w8 w4 merge emu; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 200 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
for t in 8192 32768; do
  python3 -c "import json; s=json.load(open('$OUT/study/emu$t/summary.json')); print($t, {k: s.get(k) for k in ('configs','correct_configs','emulated_ranks_tested')})" 2>&1 | tail -1
done
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
