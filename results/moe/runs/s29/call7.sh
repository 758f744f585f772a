#!/usr/bin/env bash
# s29 call 7: MoeLayerParams::half_wide (1, the default here: a half Linear-1 tile that loads its own weights gets them
# gate-up interleaved per warpgroup and runs one m64n128 batch per K block instead of two m64n64). The MoE GPU tests
# (half_wide 0 checked bit-identical in the option table; pairs sharing weights keep the old layout, so the
# pairs-against-single-CTAs tests compare the two paths too), --compare-half-wide (_w0) on W8A8 at 8K and 32K, V4-Pro
# at 2K on 32 CTAs traced (call 6: 37.8 us per half tile, ~1200 cycles per K block), memcheck on HalfAndFullTiles,
# racecheck on PairShareEqualSingleCtas.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el "v4-pro 2K on 32 CTAs"
timeout 60 build/bench/moe/bench_moe --out $OUT/c32 --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
  --precision w8a8 --orders interleaved --ctas 32 --compare-half-wide --worlds 1 --check-tokens 1 --block-s 0.05 \
  --warmup-s 0.03 --trace --trace-csv $OUT/c32/tiles.csv > $OUT/c32.log 2>&1
echo "rc=$?"; grep -E "fused" $OUT/c32/moe.csv | cut -d, -f10,11; gzip -f $OUT/c32/tiles.csv
el bench
timeout 240 build/bench/moe/bench_moe --out $OUT/w8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-half-wide --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8.log
python3 - $OUT/w8/moe.csv <<'PY'
import csv, sys, math
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['tokens'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
tf = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['tflops']) for r in rows}
g = {}
for (sh, T, rt, b), t in sorted(med.items()):
    if b in ('fused_wave', 'fused_interleaved'):
        v = med.get((sh, T, rt, b + '_w0'))
        print(f"{sh:18s} {T:>5s} {rt:8s} {b:18s} {t:7.3f} ms frac {tf[(sh, T, rt, b)] / ceil[(sh, T, rt)]:.3f} time_w0/time {v / t:.3f}")
        g.setdefault((b, T), []).append(v / t)
for k, v in sorted(g.items()):
    print(k, 'geomean %.3f min %.3f max %.3f' % (math.exp(sum(map(math.log, v)) / len(v)), min(v), max(v)))
PY
el sanitizers
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 100 "$CS" --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $OUT/san_memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san_memcheck.log | tr '\n' ' ')"
timeout 120 "$CS" --tool racecheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.PairShareEqualSingleCtas' > $OUT/san_racecheck.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/san_racecheck.log | tr '\n' ' ')"
el done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
