#!/usr/bin/env bash
# s25 call 3: the in-kernel expansion with leases of 8 chunks per atomic and one token-count load per expert (call 2: one atomic and one load per chunk on the warp's serial path; in-kernel 0.88-1.0x the pre-pass at 2048 tokens); otherwise as call 2 (call 1 fenced every chunk: at 2048
# tokens, where the layer waits for its weights, the expansion ran at a third of the pre-pass's rate). Tests (every
# MoE layer GPU test, own process), memcheck / racecheck on W4A8SingleRank and W4A8EmptyExpertsAndRepeatedCalls,
# then the whole W4A8 grid with --compare-expand (in-kernel vs pre-pass in one process).
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
if ! grep -q "MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls rc=0" $OUT/tests/moe-tests.log; then el "W4A8 failed: stop"; exit 1; fi
el sanitizers
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck racecheck; do
  timeout 150 $SAN --tool $tool --error-exitcode 3 --print-limit 12 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter=MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls > $OUT/san_$tool.log 2>&1
  echo "$tool exit $?"; grep -m2 -A3 "Error:" $OUT/san_$tool.log; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_$tool.log | head -3
done
el grid
build/bench/moe/bench_moe --out $OUT/expand --precision w4a8 --orders wave,interleaved --compare-expand \
  --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/expand.log 2>&1
echo "grid rc=$?"; tail -3 $OUT/expand.log
python3 - $OUT/expand/moe.csv <<'PY'
import csv, sys, collections
by = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    by[(r['shape'], r['tokens'], r['routing'], r['precision'])][r['backend']] = float(r['median_ms'])
print(f"{'config':44s} {'unfused':>8s} {'wave':>8s} {'wave_pre':>8s} {'intl':>8s} {'intl_pre':>8s}  pre/ink wave intl  unf/ink unf/pre")
for k, b in by.items():
    g = lambda n: b.get(n, float('nan'))
    ink = min(g('fused_wave'), g('fused_interleaved')); pre = min(g('fused_wave_pre'), g('fused_interleaved_pre'))
    print(f"{' '.join(k):44s} {g('unfused'):8.3f} {g('fused_wave'):8.3f} {g('fused_wave_pre'):8.3f} "
          f"{g('fused_interleaved'):8.3f} {g('fused_interleaved_pre'):8.3f}  "
          f"{g('fused_wave_pre')/g('fused_wave'):.3f} {g('fused_interleaved_pre')/g('fused_interleaved'):.3f}  "
          f"{g('unfused')/ink:.3f} {g('unfused')/pre:.3f}")
PY
el done
(cd $OUT && rm -f */blocks.json && tar czf call3.tgz tests tests.log san_*.log expand expand.log 2>/dev/null)
