#!/usr/bin/env bash
# s30 call 1: MoeLayerParams::half_pipe (1, the default here: a half_wide Linear-1 tile's K blocks with two scratch
# accumulators in turn, block kb + 1's batch issued before block kb's is waited for and promoted). The MoE GPU tests
# (the option table flips half_pipe 0; RejectsBadClusters now includes it), the mainloop probe with its half-tile
# variants (half, half-tog, half-wide, half-wide-ip, half-pipe, half-pipe-ip, half-tog-pipe; session 29's were never
# run), V4-Pro 2K on 32 CTAs (every tile a half tile) and W8A8 8K/32K on five shapes with --compare-half-pipe (_q0),
# memcheck and synccheck on HalfAndFullTiles, racecheck on PairShareEqualSingleCtas.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el probe
timeout 60 build/bench/moe/mainloop_probe --json $OUT/probe.json > $OUT/probe.log 2>&1
echo "probe rc=$?"; cat $OUT/probe.log
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
el "v4-pro 2K on 32 CTAs"
timeout 60 build/bench/moe/bench_moe --out $OUT/c32 --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
  --precision w8a8 --orders interleaved --ctas 32 --compare-half-pipe --worlds 1 --check-tokens 1 --block-s 0.05 \
  --warmup-s 0.03 > $OUT/c32.log 2>&1
echo "rc=$?"; grep -E "fused" $OUT/c32/moe.csv | cut -d, -f10,11,14
el bench
timeout 260 build/bench/moe/bench_moe --out $OUT/w8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash,qwen3-235b-a22b \
  --tokens 8192,32768 --precision w8a8 --orders wave,interleaved --compare-half-pipe --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/w8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/w8.log
python3 - $OUT/w8/moe.csv <<'PY'
import csv, sys, math
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['tokens'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
med = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
tf = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['tflops']) for r in rows}
fl = {(r['shape'], r['tokens'], r['routing'], r['backend']): r['flipped'] for r in rows}
g = {}
for (sh, T, rt, b), t in sorted(med.items()):
    if b in ('fused_wave', 'fused_interleaved'):
        v = med.get((sh, T, rt, b + '_q0'))
        print(f"{sh:18s} {T:>5s} {rt:8s} {b:18s} {t:7.3f} ms frac {tf[(sh, T, rt, b)] / ceil[(sh, T, rt)]:.3f} time_q0/time {v / t:.3f} flip {fl[(sh, T, rt, b + '_q0')]}")
        g.setdefault((b, T), []).append(v / t)
for k, v in sorted(g.items()):
    print(k, 'geomean %.3f min %.3f max %.3f' % (math.exp(sum(map(math.log, v)) / len(v)), min(v), max(v)))
PY
el sanitizers
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck; do
timeout 100 "$CS" --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $OUT/san_$tool.log 2>&1
echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
timeout 120 "$CS" --tool racecheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.PairShareEqualSingleCtas' > $OUT/san_racecheck.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/san_racecheck.log | tr '\n' ' ')"
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
