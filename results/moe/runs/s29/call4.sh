#!/usr/bin/env bash
# s29 call 4: MoeLayerParams::row_order (1 = sched::spread_row_order: single short rows of small experts spread
# between the other rows instead of coming in runs). The MoE GPU tests (row_order 1 checked bit-identical in the
# option table), then --compare-row-order (_o1) on W8A8 at 8K and 32K, V4-Pro, V4-Flash, DeepSeek-V3, GLM-Flash,
# both routings, both orders.
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
timeout 330 build/bench/moe/bench_moe --out $OUT/o8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-row-order --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/o8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/o8.log; ratios $OUT/o8/moe.csv _o1
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
