#!/usr/bin/env bash
# s24 call 2: the branch with the second half-tile amax barrier: sanitizers on HalfAndFullTiles (the 256-column
# tiles and the half tiles), the whole test binary, then 128- vs 256-column Linear-2 tiles at 2048 and 8192 tokens.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in racecheck memcheck synccheck; do
  timeout 200 $SAN --tool $tool --error-exitcode 3 --print-limit 12 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter=MoeLayerGpu.HalfAndFullTiles:MoeLayerGpu.SingleRankPartialTiles > $OUT/san_$tool.log 2>&1
  echo "$tool exit $?"; grep -m2 -A3 "Error:" $OUT/san_$tool.log; grep SUMMARY $OUT/san_$tool.log
done
el tests
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SANITIZE=0 MOE_TEST_TIMEOUT=45 OUT=$OUT/tests \
  bash scripts/moe-device.sh > $OUT/tests.log 2>&1
echo "tests ok: $(grep -c 'rc=0 ' $OUT/tests/moe-tests.log) of $(grep -c 'rc=' $OUT/tests/moe-tests.log)"
grep -A12 "rc=[1-9]" $OUT/tests/moe-tests.log | head -40
el wide
build/bench/moe/bench_moe --out $OUT/wide --shapes all --tokens 2048,8192 --routing balanced,skewed \
  --precision w8a8,w4a8 --orders wave,interleaved --compare-l2-wide --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 > $OUT/wide.log 2>&1
echo "wide rc=$?"; tail -3 $OUT/wide.log
python3 - $OUT/wide/moe.csv <<'PY'
import csv, sys, collections
by = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    by[(r['shape'], r['tokens'], r['routing'], r['precision'])][r['backend']] = float(r['median_ms'])
print(f"{'config':50s} {'unf':>8s} {'wave':>8s} {'wave_w':>8s} {'intl':>8s} {'intl_w':>8s}  w/n wave intl")
for k, b in by.items():
    g = lambda n: b.get(n, float('nan'))
    print(f"{'/'.join(k):50s} {g('unfused'):8.3f} {g('fused_wave'):8.3f} {g('fused_wave_w'):8.3f} {g('fused_interleaved'):8.3f} "
          f"{g('fused_interleaved_w'):8.3f}  {g('fused_wave')/g('fused_wave_w'):.3f} {g('fused_interleaved')/g('fused_interleaved_w'):.3f}")
PY
el done
cd $OUT && tar czf all.tgz san_*.log tests tests.log wide wide.log && rm -rf tests wide
