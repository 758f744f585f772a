#!/usr/bin/env bash
# s27 call 1: MoeLayerParams::a_trim (an expert's last row tile loads its A rows only up to its valid rows rounded up
# to 16, boxes of 16 rows; default on). Every MoE GPU test (the trimmed path is the default; check_a_trim runs the
# untrimmed one beside it, bit for bit); then the 8K W8A8 points of four shapes with --compare-a-trim (backend _t0 =
# untrimmed, i.e. main's kernel) and --compare-pair-share (V4-Pro: A-sharing pairs + trim against weight sharing).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out|^\[       OK" $OUT/test.log | head -40
el bench
timeout 330 build/bench/moe/bench_moe --out $OUT/at --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-a-trim --compare-pair-share --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/at.log 2>&1
echo "bench rc=$?"; tail -3 $OUT/at.log
python3 - $OUT/at/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['routing'])
        o = 'fused_' + r['backend'].split('_')[1]
        print(f"{r['shape']:18s} {r['routing']:8s} {r['backend']:26s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"frac {float(r['tflops']) / ceil[k]:.3f} vs_order_base {float(r['median_ms'])/med[(k[0],k[1],o)]:.3f} flip {r['flipped']}")
PY
el done
cd $OUT && rm -f at/blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
