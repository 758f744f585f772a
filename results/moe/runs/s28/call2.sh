#!/usr/bin/env bash
# s28 call 2: MoeLayerParams::l2_borrow (default 1): a 256-column Linear-2 tile stages its second output block in the
# B buffer of its last pipeline stage, which the epilogue warps hand back to the producer; 0 = through the slot (the
# previous kernel). Every MoE GPU test (l2_borrow 0 beside the default, bit for bit); --compare-borrow (_b0) on the
# wide-tile shapes at 8K and 32K W8A8 and 8K W4A8; the per-tile trace of V4-Pro 8K; sanitizers on the pair tests.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 120 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
ratios() {
python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['tokens'], r['precision'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['tokens'], r['precision'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    b = r['backend']
    if b.startswith('fused') and not b.endswith('_b0'):
        k = (r['shape'], r['tokens'], r['precision'], r['routing'])
        off = med.get(k + (b + '_b0',))
        print(f"{r['shape']:18s} {r['tokens']:>5s} {r['precision']} {r['routing']:8s} {b:18s} {float(r['median_ms']):8.3f} ms "
              f"spread {float(r['spread']):.3f} frac {float(r['tflops']) / ceil[k]:.3f} time_b0/time {off / float(r['median_ms']) if off else float('nan'):.3f}")
PY
}
el bench-w8
timeout 200 build/bench/moe/bench_moe --out $OUT/b8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,qwen3-235b-a22b,glm-flash,qwen3-30b-a3b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-borrow --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/b8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/b8.log; ratios $OUT/b8/moe.csv
el bench-w4
timeout 80 build/bench/moe/bench_moe --out $OUT/b4 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 \
  --tokens 8192 --precision w4a8 --orders wave,interleaved --compare-borrow --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/b4.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/b4.log; ratios $OUT/b4/moe.csv
el trace
timeout 60 build/bench/moe/bench_moe --out $OUT/trace --shapes deepseek-v4-pro --tokens 8192 --precision w8a8 --orders interleaved \
  --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 --trace --trace-csv $OUT/trace/tiles.csv > $OUT/trace.log 2>&1
echo "trace rc=$?"; gzip -f $OUT/trace/tiles.csv
el sanitizers
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck racecheck; do
  timeout 100 "$CS" --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.PairShareEqualSingleCtas' > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
