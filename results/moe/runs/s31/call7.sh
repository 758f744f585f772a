#!/usr/bin/env bash
# s31 call 7: MoeLayerParams::stream_lane (the streamed rows first, walked by N CTAs of their own: a lane of the
# interleaved scheduler). GPU tests (HalfAndFullTiles and CtaPairsEqualSingleCtas flip stream_lane; RejectsBadClusters
# names bad values); --compare-lane 16,24,32,40,48 (_lnN) on W8A8 8K: V4-Pro, V4-Flash, DeepSeek-V3, GLM-Flash skewed,
# V4-Pro balanced; the trace of V4-Pro 8K skewed with --stream-lane 32.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el "bench lanes"
timeout 200 build/bench/moe/bench_moe --out $OUT/lanes --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash \
  --tokens 8192 --routing skewed --precision w8a8 --orders interleaved --compare-lane 16,24,32,40,48 --worlds 1 \
  --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/lanes.log 2>&1
echo "rc=$?"; tail -1 $OUT/lanes.log
timeout 100 build/bench/moe/bench_moe --out $OUT/lanes_bal --shapes deepseek-v4-pro --tokens 8192 --routing balanced \
  --precision w8a8 --orders interleaved --compare-lane 16,32,48 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/lanes_bal.log 2>&1
echo "rc=$?"; tail -1 $OUT/lanes_bal.log
python3 - $OUT/lanes/moe.csv $OUT/lanes_bal/moe.csv <<'PY'
import csv, sys
for f in sys.argv[1:]:
    rows = list(csv.DictReader(open(f)))
    ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
    base = {(r['shape'], r['routing']): float(r['median_ms']) for r in rows if r['backend'] == 'fused_interleaved'}
    for r in rows:
        if r['backend'].startswith('fused_interleaved'):
            k = (r['shape'], r['routing'])
            print(f"{r['shape']:18s} {r['routing']:8s} {r['backend']:24s} {float(r['median_ms']):7.3f} ms frac {float(r['tflops']) / ceil[k]:.3f} time/default {float(r['median_ms']) / base[k]:.3f} flip {r['flipped']}")
PY
el "trace lane 32"
timeout 90 build/bench/moe/bench_moe --out $OUT/trace_l32 --shapes deepseek-v4-pro --tokens 8192 --routing skewed \
  --precision w8a8 --orders interleaved --stream-lane 32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  --trace --trace-csv $OUT/trace_l32/tiles.csv > $OUT/trace_l32.log 2>&1
echo "rc=$?"; gzip -f $OUT/trace_l32/tiles.csv; python3 scripts/moe-trace-kinds.py $OUT/trace_l32/tiles.csv.gz
el done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
