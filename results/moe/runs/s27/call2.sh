#!/usr/bin/env bash
# s27 call 2: MoeLayerParams::merge_loads (default 1: one TMA load where a stage's boxes are adjacent: a lone CTA's
# 128-row A, gate+up through a 3-d view of W1, a wide Linear-2 tile's two W2 blocks); call 1 found a_trim (more, smaller
# A boxes) slower, now off by default. Every MoE GPU test (check_a_trim runs a_trim 1 and merge_loads 0 beside the
# default, bit for bit); the 8K W8A8 points of five shapes with --compare-merge (_m0 = main's loads), --compare-a-trim (_t1)
# and --compare-pair-share.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out|^\[       OK" $OUT/test.log | head -40
el bench
timeout 330 build/bench/moe/bench_moe --out $OUT/at --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-merge --compare-a-trim --compare-pair-share --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
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
cd $OUT && rm -f at/blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
