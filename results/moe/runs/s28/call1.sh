#!/usr/bin/env bash
# s28 call 1 (s27 call 8 rerun): MoeLayerParams::a_scales 1 (the MMA warpgroups read the A row scales from global memory, the producer
# issues 2 TMA loads per stage instead of 3; opt-in). Every MoE GPU test (a_scales 1 beside the default, bit for bit);
# 8K W8A8 V4-Pro, V4-Flash with --compare-a-scales (_as1); the W4A8 default against the build before this
# change (build/old = main dd3833d; the new build spills 140 bytes of loads in W4A8, was 44) in ABBA processes.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 100 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el bench
timeout 80 build/bench/moe/bench_moe --out $OUT/as --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-a-scales --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/as.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/as.log
python3 - $OUT/as/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['routing'])
        o = 'fused_' + r['backend'].split('_')[1]
        print(f"{r['shape']:18s} {r['routing']:8s} {r['backend']:24s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"frac {float(r['tflops']) / ceil[k]:.3f} vs_order_base {float(r['median_ms'])/med[(k[0],k[1],o)]:.3f}")
PY
el ab-w4
BINS="build/old/bench_moe build/bench/moe/bench_moe" OUT=$OUT timeout 70 bash scripts/moe-ab.sh --shapes deepseek-v3 \
  --tokens 8192 --routing balanced --precision w4a8 --orders wave,interleaved --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  2>&1 | tail -9
el done
cd $OUT && rm -f */blocks.json ab/*/blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
