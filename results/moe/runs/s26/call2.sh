#!/usr/bin/env bash
# s26 call 2 (branch wip/pair-rows3): pair_rows 1 shares the weights only where both 128-rows of a 256-token row are
# full tiles (call 1: pairing a full with a half tile runs the half at the full tile's pace, 0.85-0.97x); otherwise
# the A-sharing order of pair_rows 0. Tests; V4 shapes at 8K with --compare-pair-rows; A/B of the default kernel
# against main (the producer's tile walk changed for every mode); the per-tile trace and ncu DRAM bytes of V4-Pro 8K.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 120 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.PairRows*:MoeLayerGpu.TraceRecordsEveryTile:MoeLayerGpu.CtaPairs*:MoeLayerGpu.HalfAndFullTiles:MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.RejectsBadClusters' \
  > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out|OK \]" $OUT/test.log | head -20
el bench
timeout 200 build/bench/moe/bench_moe --out $OUT/pb --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/pb.log 2>&1
echo "bench rc=$?"; tail -2 $OUT/pb.log
python3 - $OUT/pb/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['routing'])
        print(f"{r['shape']:18s} {r['routing']:8s} {r['backend']:24s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"frac {float(r['tflops']) / ceil[k]:.3f} ratio {r['ratio_vs_fused']} flip {r['flipped']}")
PY
el ab
BINS="build/old/bench_moe build/bench/moe/bench_moe" OUT=$OUT timeout 150 bash scripts/moe-ab.sh --shapes deepseek-v4-pro,deepseek-v3 \
  --tokens 8192 --routing balanced --precision w8a8 --orders wave,interleaved --worlds 1 --block-s 0.05 --warmup-s 0.03 \
  2>&1 | tail -12
el trace
timeout 60 build/bench/moe/bench_moe --out $OUT/trace --shapes deepseek-v4-pro --tokens 8192 --precision w8a8 \
  --orders interleaved --worlds 1 --check-tokens 1 --trace-csv $OUT/trace/tiles.csv --no-time > $OUT/trace.log 2>&1
echo "trace rc=$?"; grep "trace " $OUT/trace.log
el ncu
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for r in balanced skewed; do
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 2 \
    --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
    build/bench/moe/bench_moe --out $OUT/ncu-$r --shapes deepseek-v4-pro --tokens 8192 --routing $r --precision w8a8 \
    --orders interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$r.txt 2>&1
  echo "ncu $r (launch 1: pair_rows 0, launch 2: pair_rows 1)"; grep -E "dram__|lts__|gpu__time" $OUT/ncu-$r.txt
done
el done
(cd $OUT && gzip -f trace/tiles.csv && rm -rf ab/*/blocks.json pb/blocks.json && tar czf ab.tgz ab && rm -rf ab)
