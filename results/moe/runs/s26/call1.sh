#!/usr/bin/env bash
# s26 call 1 (branch wip/pair-rows3): pair_rows 1 rebuilt without ghost tiles (an expert's two row tiles share the
# weights; an odd last row tile runs as an A-sharing pair, half its positions skipped by both CTAs). Tests: the pairs
# against single CTAs (W8A8, W4A8, both orders, P = 1 and emulated 2), every tile once in the trace (both orders,
# pair_rows 0 and 1), bad input; then W8A8 at 8192 tokens on 4 shapes, both routings and orders, --compare-pair-rows.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 90 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter=MoeLayerGpu.PairRowsEqualSingleCtas:MoeLayerGpu.TraceRecordsEveryTile:MoeLayerGpu.RejectsBadClusters:MoeLayerGpu.CtaPairsEqualSingleCtas \
  > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out|OK \]" $OUT/test.log | head -20
el bench
timeout 400 build/bench/moe/bench_moe --out $OUT/pb --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/pb.log 2>&1
echo "bench rc=$?"; tail -3 $OUT/pb.log
python3 - $OUT/pb/moe.csv <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['routing'])
        print(f"{r['shape']:18s} {r['routing']:8s} {r['backend']:24s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"frac {float(r['tflops']) / ceil[k]:.3f} ratio {r['ratio_vs_fused']} flip {r['flipped']}")
PY
el done
