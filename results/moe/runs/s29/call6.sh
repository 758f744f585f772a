#!/usr/bin/env bash
# s29 call 6: MoeLayerParams::l2_prefetch_streamed (with l2_prefetch D: only the tiles of experts with one short row,
# whose weights stream from HBM, prefetch D K blocks ahead into L2): --prefetch 2,4,8 --prefetch-streamed (_pf<D>
# every tile, _ps<D> streamed rows only) on V4-Pro, V4-Flash, DeepSeek-V3 at 8K W8A8, both routings, both orders;
# racecheck on PairShareEqualSingleCtas (its option table now flips row_order and half_together too); the whole MoE GPU
# test suite on this build; and V4-Pro at 2048 tokens (every tile a half tile streaming its weights from HBM) on 32,
# 66 and 132 CTAs, traced: how fast one SM's half tiles stream when the DRAM is not saturated (the probe's 33 SMs got
# ~80 GB/s each).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el bench
timeout 300 build/bench/moe/bench_moe --out $OUT/p8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 \
  --tokens 8192 --precision w8a8 --orders wave,interleaved --prefetch 2,4,8 --prefetch-streamed --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/p8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/p8.log
python3 - $OUT/p8/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {(r['shape'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
ceil = {(r['shape'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
tf = {(r['shape'], r['routing'], r['backend']): float(r['tflops']) for r in rows}
for (sh, rt, b), t in sorted(med.items()):
    if b in ('fused_wave', 'fused_interleaved'):
        vs = ' '.join(f"{v[len(b)+1:]}={med[(sh, rt, v)] / t:.3f}" for (s2, r2, v) in sorted(med) if s2 == sh and r2 == rt and v.startswith(b + '_'))
        print(f"{sh:18s} {rt:8s} {b:18s} {t:7.3f} ms frac {tf[(sh, rt, b)] / ceil[(sh, rt)]:.3f}  time_X/time: {vs}")
PY
grep -o '"variants_bitwise_equal": [a-z]*' $OUT/p8/summary.json | sort | uniq -c
for n in 32 66 132; do
  el "v4-pro 2K on $n CTAs"
  timeout 60 build/bench/moe/bench_moe --out $OUT/c$n --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
    --precision w8a8 --orders interleaved --ctas $n --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 --trace \
    --trace-csv $OUT/c$n/tiles.csv > $OUT/c$n.log 2>&1
  echo "rc=$?"; grep -E "fused" $OUT/c$n/moe.csv | cut -d, -f10,11; gzip -f $OUT/c$n/tiles.csv
done
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el racecheck
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 "$CS" --tool racecheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.PairShareEqualSingleCtas' > $OUT/san_racecheck.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED' $OUT/san_racecheck.log | tr '\n' ' ')"
el done
cd $OUT && rm -f */blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
