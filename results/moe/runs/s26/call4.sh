#!/usr/bin/env bash
# s26 call 4 (branch wip/pair-rows3): call 3's remapped weight-sharing pairs (pair_rows 1: both rows full tiles;
# new pair_rows 2: any two rows of an expert, a full with a half tile too: the trace of call 3 says half tiles are
# bound by their data, 0.85-1.0x a full tile's time, so lock-stepping them with a full tile may cost nothing), and
# half tiles no longer load the A box of their padding rows (every mode). Tests; 4 shapes at 8K with
# --compare-pair-rows (_pb = 1, _pc = 2); A/B of the default kernel against main.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
timeout 120 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.PairRows*:MoeLayerGpu.TraceRecordsEveryTile:MoeLayerGpu.CtaPairs*:MoeLayerGpu.HalfAndFullTiles:MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8Emulated:MoeLayerGpu.EmulatedP8:MoeLayerGpu.RejectsBadClusters' \
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
  --tokens 8192 --precision w8a8 --orders wave,interleaved --worlds 1 --block-s 0.05 --warmup-s 0.03 \
  2>&1 | tail -17
el done
cd $OUT && rm -rf ab/*/blocks.json */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
