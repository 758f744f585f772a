#!/usr/bin/env bash
# s54 call 5 (nvidia-h200): the P = 1 table of record with auto's new third order (Expert-Wave with lagged waves where
# the simulator predicts it >= 5 % ahead of both others: kLagMinGain, fitted on call 4), timed beside both orders
# (scripts/moe-study.sh now passes --compare-wave-lag): STEPS="w8 w4 merge" (84 points, emulated P = 2, 4, 8 at 2048
# tokens). build/s54c5.tar.xz: bench_moe, test_moe_layer_gpu and libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s54c5.tar.xz -C build/pk
mkdir -p build/bench/moe build/tests/moe_gpu build/src/kernels/attention
mv build/pk/bench_moe build/bench/moe/ && mv build/pk/test_moe_layer_gpu build/tests/moe_gpu/ && mv build/pk/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for st in w8 w4 merge; do
  OUT=$O/study STEPS=$st timeout 280 bash scripts/moe-study.sh >> $O/study.log 2>&1
  el "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $O/study.log
python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
grep -E "wave-lagged" $O/study/moe/table.md
cd $O && rm -f study/*/blocks.json && tar czf c5.tgz --exclude=c5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name c5.tgz -exec rm -rf {} +
