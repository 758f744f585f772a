#!/usr/bin/env bash
# s60 call 4 (nvidia-h200): main with the tanh silu (s59) and auto's every-Linear-1-tile-first order (XSTAGE_MOE_L1_FIRST,
# taken at P = 1 where the lag pays and the simulator predicts it no slower). The MoE layer GPU tests (with the new
# order among the tile-edge variants), the P = 1 table of record (scripts/moe-study.sh STEPS="w8 w4 merge", which now
# times fused_l1first on every configuration), then O X X O against bench_moe_o (main 464308f, before the silu change)
# on the V4 W8A8 8K layers if time is left. Carry build/s60.tar.xz (bench_moe, bench_moe_o, test_moe_layer_gpu).
#   OUT=$OUT bash results/moe/runs/s60/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s60.tar.xz -C build/pk
mkdir -p build/bench/moe build/tests/moe_gpu
cp build/pk/bench_moe build/pk/bench_moe_o build/bench/moe/ && cp build/pk/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O/runs
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
el "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
for st in w8 w4 merge; do
  left=$(( ${TABLE_END:-540} - ($(date +%s) - T0) ))
  [ $left -gt 20 ] || { el "$st skipped"; continue; }
  OUT=$O/study STEPS=$st timeout $left bash scripts/moe-study.sh >> $O/study.log 2>&1
  el "$st rc=$?"
done
grep -E "^configs|^orders" $O/study.log
python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s.get(k) for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
i=0
for b in bench_moe_o bench_moe bench_moe bench_moe_o; do
  i=$((i+1)); left=$(( ${OX_END:-570} - ($(date +%s) - T0) ))
  [ $left -gt 30 ] || { el "ox$i skipped"; continue; }
  timeout $left build/bench/moe/$b --out $O/runs/ox$i --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.04 --warmup-s 0.02 \
    > $O/runs/ox$i.log 2>&1
  el "ox$i $b rc=$?"
done
cd $O && rm -f study/*/blocks.json runs/*/blocks.json && tar czf ../c4.tgz . && cd .. && rm -rf $O
