#!/usr/bin/env bash
# s58 (nvidia-h200): main with MoeLayerParams::zero_padding 1 by default (session 58's measurement: on stale receive rows
# the W8A8 8K layers took a median 0.983x the time with it). The MoE layer GPU tests on that default, then the P = 1
# table of record again (scripts/moe-study.sh STEPS="w8 w4 merge", as results/moe/runs/s54/call5.sh), into one tarball
# (the device tool brings back few files). Carry build/s57pad.tar.xz built from this commit (build-padding.sh).
#   OUT=$OUT bash results/moe/runs/s58/table.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk58 && tar xJf build/s57pad.tar.xz -C build/pk58
mkdir -p build/bench/moe build/tests/moe_gpu
cp build/pk58/bench_moe build/bench/moe/ && cp build/pk58/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
O=$OUT/t58 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
el "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
for st in w8 w4 merge; do
  left=$(( 585 - ($(date +%s) - T0) ))
  [ $left -gt 20 ] || { el "$st skipped"; continue; }
  OUT=$O/study STEPS=$st timeout $left bash scripts/moe-study.sh >> $O/study.log 2>&1
  el "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $O/study.log
python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
cd $O && rm -f study/*/blocks.json && tar czf ../t58.tgz . && cd .. && rm -rf $O
