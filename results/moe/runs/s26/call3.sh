#!/usr/bin/env bash
# s26 call 3 (branch wip/pair-rows3): pair_rows 1 as a remap of the A-sharing pairs' own positions (no scheduler
# change, no skipped positions): where an expert's 128-rows b, b + 1 are both full tiles, the pair's positions of
# the two rows compute row b + crank at one N tile and share the weight boxes (call 2's 256-token rows skipped
# positions, which broke the round-robin lockstep: 0.87-0.89x). Tests; 4 shapes at 8K with --compare-pair-rows;
# A/B of the default kernel against main; ncu DRAM bytes (pair_rows 0, 1); the per-tile trace of V4-Pro 8K.
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
timeout 240 build/bench/moe/bench_moe --out $OUT/pb --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash --tokens 8192 \
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
  2>&1 | tail -9
el ncu
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for cfg in "deepseek-v4-pro skewed" "deepseek-v3 balanced"; do
  set -- $cfg
  timeout 120 "$NCU" -k regex:moe_fused_kernel -c 2 \
    --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
    build/bench/moe/bench_moe --out $OUT/ncu-$1-$2 --shapes $1 --tokens 8192 --routing $2 --precision w8a8 \
    --orders interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$1-$2.txt 2>&1
  echo "ncu $1 $2 (launch 1: pair_rows 0, launch 2: pair_rows 1)"; grep -E "dram__|lts__|gpu__time" $OUT/ncu-$1-$2.txt
done
el trace
mkdir -p $OUT/trace
timeout 60 build/bench/moe/bench_moe --out $OUT/trace --shapes deepseek-v4-pro --tokens 8192 --precision w8a8 \
  --orders interleaved --worlds 1 --check-tokens 1 --trace-csv $OUT/trace/tiles.csv --no-time > $OUT/trace.log 2>&1
echo "trace rc=$?"; grep "trace " $OUT/trace.log
el done
cd $OUT && rm -rf ab/*/blocks.json */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
