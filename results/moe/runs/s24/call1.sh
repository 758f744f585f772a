#!/usr/bin/env bash
# s24 call 1: branch wip/l2-epilogue-warps (build/bench/moe, build/tests/moe_gpu) against main 797d98d
# (build/old/bench_moe). Tests, sanitizers (incl. the 256-column tiles), the l2-wide comparison, the A/B.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SANITIZE=${SAN:-1} MOE_TEST_TIMEOUT=45 \
  MOE_SAN_FILTER="MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.HalfAndFullTiles" \
  OUT=$OUT/tests bash scripts/moe-device.sh > $OUT/tests.log 2>&1
grep -E "rc=|exit|SUMMARY" $OUT/tests.log | grep -vE "rc=0 " | head -30
echo "tests ok: $(grep -c 'rc=0 ' $OUT/tests/moe-tests.log) of $(grep -c 'rc=' $OUT/tests/moe-tests.log)"
grep -B2 -A12 "rc=[1-9]" $OUT/tests/moe-tests.log | head -60
if ! grep -q "MoeLayerGpu.HalfAndFullTiles rc=0" $OUT/tests/moe-tests.log; then el "wide tiles failed: no bench"; exit 1; fi
el wide
build/bench/moe/bench_moe --out $OUT/wide --shapes deepseek-v3,deepseek-v4-pro,qwen3-235b-a22b \
  --tokens 32768 --routing balanced --precision w8a8,w4a8 --orders wave,interleaved --compare-l2-wide --trace \
  --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 > $OUT/wide.log 2>&1
echo "wide rc=$?"; grep -vE "^\s*$" $OUT/wide.log | tail -40
el wide8k
build/bench/moe/bench_moe --out $OUT/wide8k --shapes deepseek-v4-pro,deepseek-v4-flash \
  --tokens 8192 --routing balanced,skewed --precision w8a8 --orders wave,interleaved --compare-l2-wide \
  --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 > $OUT/wide8k.log 2>&1
echo "wide8k rc=$?"; grep -vE "^\s*$" $OUT/wide8k.log | tail -30
el ab
BINS="build/old/bench_moe build/bench/moe/bench_moe" OUT=$OUT bash scripts/moe-ab.sh --shapes deepseek-v3,deepseek-v4-pro \
  --tokens 32768 --routing balanced --precision w8a8 --orders wave,interleaved --trace --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 > $OUT/ab.log 2>&1
tail -30 $OUT/ab.log
el done
