#!/usr/bin/env bash
# s28 call 6 (the kernel of call 3: l2_borrow 1 by default; early_release present, 0 by default): every MoE GPU test;
# the table of record, STEPS="w8 w4 merge" of scripts/moe-study.sh (the 84-point grid, both orders, emulated P = 2, 4, 8
# bit-identity); then the DeepSeek-V4 W8A8 points at 8K with long blocks (0.3 s blocks, 0.2 s warm-ups, 2 ABBA rounds),
# l2_borrow against the slot (_b0), both orders, the ceiling and unfused in the same process.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 120 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
for st in w8 w4 merge; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 220 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
el v4-long
timeout 150 build/bench/moe/bench_moe --out $OUT/v4 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-borrow --worlds 1 --check-tokens 1 --block-s 0.3 --warmup-s 0.2 --rounds 2 \
  > $OUT/v4.log 2>&1
echo "bench rc=$?"
python3 - $OUT/v4/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['tokens'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['tokens'], r['routing'])
        o = 'fused_' + r['backend'].split('_')[1]
        print(f"{r['shape']:18s} {r['tokens']:>5s} {r['routing']:8s} {r['backend']:24s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"frac {float(r['tflops']) / ceil[k]:.3f} vs_order_base {float(r['median_ms'])/med[k + (o,)]:.3f} flip {r['flipped']}")
PY
el done
cd $OUT && rm -f study/*/blocks.json */blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
