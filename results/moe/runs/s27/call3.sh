#!/usr/bin/env bash
# s27 call 3: merge_loads extended: a weight-sharing pair's CTA multicasts one whole weight box (gate or up; a wide
# Linear-2 tile's block 0 or 1) instead of half of each (4 -> 3 TMA loads per stage per CTA); W4A8's group scales of
# gate and up by one 3-d load, a wide Linear-2 tile's 256 by one. Every MoE GPU test; W8A8 8K V4-Pro / V4-Flash with
# --compare-merge --compare-pair-share; W4A8 8K V4-Pro / DeepSeek-V3 with --compare-merge.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
summ() {
python3 - $1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['routing'])
        o = 'fused_' + r['backend'].split('_')[1]
        print(f"{r['shape']:18s} {r['routing']:8s} {r['precision']} {r['backend']:24s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"frac {float(r['tflops']) / ceil[k]:.3f} vs_order_base {float(r['median_ms'])/med[(k[0],k[1],o)]:.3f} flip {r['flipped']}")
PY
}
el bench w8
timeout 200 build/bench/moe/bench_moe --out $OUT/w8 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-merge --compare-pair-share --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/w8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8.log; summ $OUT/w8/moe.csv
el bench w4
timeout 150 build/bench/moe/bench_moe --out $OUT/w4 --shapes deepseek-v4-pro,deepseek-v3 --tokens 8192 --routing balanced \
  --precision w4a8 --orders wave,interleaved --compare-merge --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/w4.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w4.log; summ $OUT/w4/moe.csv
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
