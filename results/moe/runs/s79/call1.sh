#!/usr/bin/env bash
# s79 call 1 (any sm_90 GPU). Carry build/s79a.tar.xz (every GPU test binary of main, scripts/gpu-tests-device.sh
# pack) and build/s79b.tar.xz (bench_moe, plan_bench, bench_ulysses, stripped).
#   OUT=$OUT bash results/moe/runs/s79/call1.sh
# What changed on the GPU side this session: the benchmarks' parsers (--help, plan_bench's counts) and three device
# scripts' argument handling (attention_check.py before torch, plot_calibration.py's lazy matplotlib); the libraries'
# code did not (comments only). So: every GPU test, then the changed programs end to end on small configurations.
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c1 && mkdir -p "$O/w"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s79a.tar.xz
B=build/s79b && mkdir -p $B && tar xJf build/s79b.tar.xz -C $B
source scripts/moe-env.sh
export LD_LIBRARY_PATH=$PWD/build/src/kernels/attention:${LD_LIBRARY_PATH:-}
echo "== bench_moe --help: $($B/bench_moe --help | head -1)"
timeout 200 $B/bench_moe --shapes dit-moe-xl,qwen3-30b-a3b --tokens 2048 --routing balanced,skewed --precision w8a8,w4a8 \
  --orders wave,interleaved --worlds 1,2,4,8 --no-stream --block-s 0.02 --warmup-s 0.01 --rounds 1 --out $O/w/bm \
  > $O/w/bench_moe.txt 2>&1
echo "== bench_moe rc=$? $(grep -c 'bit-identical to P = 1' $O/w/bench_moe.txt) emulated lines bit-identical, $(grep -c 'DIFFERS' $O/w/bench_moe.txt) differ"
python3 -c "import json; s = json.load(open('$O/w/bm/summary.json')); print('   ', {k: s[k] for k in ('configs', 'correct_configs', 'emulated_ranks_tested')})"
timeout 120 $B/plan_bench --shapes qwen3-30b-a3b --tokens 2048 --worlds 1,8 --batches 2 --calls 3 > $O/w/plan.txt 2>&1
echo "== plan_bench rc=$?"; tail -3 $O/w/plan.txt
timeout 200 $B/bench_ulysses --quick --ranks 2 --block-s 0.05 --warmup-s 0.02 --out $O/w/ul > $O/w/ulysses.txt 2>&1
echo "== bench_ulysses rc=$?"; tail -1 $O/w/ulysses.txt
timeout 120 python3 bench/attention/attention_check.py sanitize $O/w build/src/kernels/attention/libxstage_attention.so \
  > $O/w/attention_check.txt 2>&1
echo "== attention_check sanitize rc=$? $(grep -c "'ok': True" $O/w/attention_check.txt) of $(grep -c sanitize-shape $O/w/attention_check.txt) ok"
python3 bench/attention/attention_check.py > /dev/null 2>&1; echo "== attention_check without arguments rc=$? (want 1)"
mkdir -p $O/w/cal && cp results/calibration/{calibration.csv,validation.csv,platform.json} $O/w/cal/ 2>/dev/null
timeout 120 python3 scripts/plot_calibration.py $O/w/cal > $O/w/plot.txt 2>&1
echo "== plot_calibration rc=$? $(tail -1 $O/w/plot.txt)"
} 2>&1 | tee $O/out.txt
rm -f $O/w/cal/*.png $O/w/bm/blocks.json $O/w/ul/blocks.json
(cd $O/w && tar czf ../c1.tgz ./* 2>/dev/null); rm -rf $O/w
