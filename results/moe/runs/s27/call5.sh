#!/usr/bin/env bash
# s27 call 5: the DeepSeek-V4 W8A8 points (8K and 32K, both routings) with long blocks (0.3 s blocks, 0.2 s warm-ups,
# 2 ABBA rounds): merged loads (default) against a load per box (_m0), both orders, the ceiling and unfused in the same
# process (call 4's table at 0.05 s blocks moved 4-6 % between processes on the same binary); then synccheck and
# racecheck on PairShareEqualSingleCtas (whole-box multicasts of weight-sharing pairs, merged loads, a_trim variants).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el bench
timeout 300 build/bench/moe/bench_moe --out $OUT/v4 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192,32768 \
  --precision w8a8 --orders wave,interleaved --compare-merge --worlds 1 --check-tokens 1 --block-s 0.3 --warmup-s 0.2 --rounds 2 \
  > $OUT/v4.log 2>&1
echo "bench rc=$?"; head -12 $OUT/v4.log | tail -9
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
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in synccheck racecheck; do
  el $tool
  timeout 120 $SAN --tool $tool --error-exitcode 3 --print-limit 12 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter=MoeLayerGpu.PairShareEqualSingleCtas:MoeLayerGpu.CtaPairsSingleRank > $OUT/san_$tool.log 2>&1
  echo "$tool exit $?"; grep -m2 -A3 "Error:" $OUT/san_$tool.log; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_$tool.log | head -3
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
