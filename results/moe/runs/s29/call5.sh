#!/usr/bin/env bash
# s29 call 5: MoeLayerParams::half_together (1, the default here: a half Linear-1 tile's gate and up batches issued
# together and waited for once per K block; 0 = one at a time, the previous kernel). The MoE GPU tests (half_together 0
# checked bit-identical in the option table), sanitizers on HalfAndFullTiles, then --compare-half (_h0) on W8A8 at 8K
# and 32K on five shapes, both routings, both orders.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
ratios() {
python3 - "$1" "$2" <<'PY'
import csv, sys
suf = sys.argv[2]
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['tokens'], r['precision'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['tokens'], r['precision'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    b = r['backend']
    if b.startswith('fused') and not b.endswith(suf):
        k = (r['shape'], r['tokens'], r['precision'], r['routing'])
        v = med.get(k + (b + suf,))
        print(f"{r['shape']:18s} {r['tokens']:>5s} {r['routing']:8s} {b:18s} {float(r['median_ms']):8.3f} ms "
              f"spread {float(r['spread']):.3f} frac {float(r['tflops']) / ceil[k]:.3f} time{suf}/time {v / float(r['median_ms']) if v else float('nan'):.3f}")
PY
}
el bench
timeout 300 build/bench/moe/bench_moe --out $OUT/h8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-half --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/h8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/h8.log; ratios $OUT/h8/moe.csv _h0
el sanitizers
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck racecheck; do
  timeout 100 "$CS" --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
