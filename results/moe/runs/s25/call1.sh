#!/usr/bin/env bash
# s25 call 1: W4A8 int4 -> e4m3 expansion inside the fused kernel (MoeLayerParams::int4_expand, auto = in the kernel;
# W4A8 now one epilogue slot). Builds carried: build/bench/moe, build/tests/moe_gpu (this commit), build/old/bench_moe
# (main before it: W4A8 pre-pass, two slots).
#   1. every MoE layer GPU test in its own process; compute-sanitizer on the W4A8 tests (memcheck, synccheck on both,
#      racecheck on W4A8SingleRank)
#   2. in-kernel expansion vs the pre-pass in one process (--compare-expand), W4A8, 2K and 32K tokens
#   3. the old build against the new in ABBA processes (W4A8 DeepSeek-V3 32K balanced): the one-slot change alone
#      shows as old fused vs new fused_*_pre
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SANITIZE=0 MOE_TEST_TIMEOUT=60 OUT=$OUT/tests \
  bash scripts/moe-device.sh > $OUT/tests.log 2>&1
echo "tests ok: $(grep -c 'rc=0 ' $OUT/tests/moe-tests.log) of $(grep -c 'rc=' $OUT/tests/moe-tests.log)"
grep -A14 "rc=[1-9]" $OUT/tests/moe-tests.log | head -50
grep -A3 "W4A8" $OUT/tests/moe-tests.log | head -30
if ! grep -q "MoeLayerGpu.W4A8SingleRank rc=0" $OUT/tests/moe-tests.log; then el "W4A8 failed: stop"; exit 1; fi
el sanitizers
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck synccheck racecheck; do
  f="MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls"
  [ $tool = racecheck ] && f="MoeLayerGpu.W4A8SingleRank"
  timeout 150 $SAN --tool $tool --error-exitcode 3 --print-limit 12 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter=$f > $OUT/san_$tool.log 2>&1
  echo "$tool exit $?"; grep -m2 -A3 "Error:" $OUT/san_$tool.log; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_$tool.log | head -3
done
el expand
build/bench/moe/bench_moe --out $OUT/expand --shapes deepseek-v3,deepseek-v4-pro,qwen3-235b-a22b,deepseek-v4-flash \
  --tokens 2048,32768 --routing balanced --precision w4a8 --orders wave,interleaved --compare-expand \
  --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 > $OUT/expand.log 2>&1
echo "expand rc=$?"; tail -3 $OUT/expand.log
python3 - $OUT/expand/moe.csv <<'PY'
import csv, sys, collections
by = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    by[(r['shape'], r['tokens'], r['routing'], r['precision'])][r['backend']] = float(r['median_ms'])
print(f"{'config':44s} {'unfused':>8s} {'wave':>8s} {'wave_pre':>8s} {'intl':>8s} {'intl_pre':>8s}  pre/ink wave intl  unf/best")
for k, b in by.items():
    g = lambda n: b.get(n, float('nan'))
    best = min(g('fused_wave'), g('fused_interleaved'))
    print(f"{' '.join(k):44s} {g('unfused'):8.3f} {g('fused_wave'):8.3f} {g('fused_wave_pre'):8.3f} "
          f"{g('fused_interleaved'):8.3f} {g('fused_interleaved_pre'):8.3f}  "
          f"{g('fused_wave_pre')/g('fused_wave'):.3f} {g('fused_interleaved_pre')/g('fused_interleaved'):.3f}  {g('unfused')/best:.3f}")
PY
el ab
BINS="build/old/bench_moe build/bench/moe/bench_moe" OUT=$OUT bash scripts/moe-ab.sh --shapes deepseek-v3 \
  --tokens 32768 --routing balanced --precision w4a8 --orders wave,interleaved --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 > $OUT/ab.log 2>&1
tail -12 $OUT/ab.log
el done
(cd $OUT && rm -f */blocks.json ab/*/blocks.json && tar czf call1.tgz tests tests.log san_*.log expand expand.log ab ab.log 2>/dev/null)
