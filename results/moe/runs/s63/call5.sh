#!/usr/bin/env bash
# (s62 call 7 again, on an H100: does cutting skewed V4-Pro's DRAM re-reads pay where the layer is more memory-bound? The
# patch is results/moe/runs/s62/group-rows.patch applied to main 31d586f.)
# s63 call 5 (nvidia-h100-x1: the layer more memory-bound than on an H200): row groups (MoeLayerParams::group_rows, s32's walk ported to today's scheduler): the MoE
# layer GPU tests (the default kernel's scheduler code changed; group_rows 2 flipped on every check_loads case, its
# refusals), then the V4 W8A8 8K points with group_rows 2 beside the default and an identical-work control, the floors
# in the same blocks. Carry build/s63g.tar.xz (bench_moe, test_moe_layer_gpu; stripped).
#   OUT=$OUT bash results/moe/runs/s63/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/bench/moe build/tests/moe_gpu && tar xJf build/s63g.tar.xz -C build/pk
cp build/pk/bench_moe build/bench/moe/ && cp build/pk/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
el "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
left=$(( ${END:-280} - ($(date +%s) - T0) ))
timeout $left build/bench/moe/bench_moe --out $O/rg --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --compare-control --compare-group-rows 2 \
  --block-s 0.05 --warmup-s 0.03 --rounds 2 > $O/rg.log 2>&1
el "bench_moe rc=$?"
grep -E "^deepseek|correct" $O/rg.log | head
python3 scripts/moe-variant-ratio.py $O/rg/moe.csv _ctl 2>&1 | head -6
python3 scripts/moe-variant-ratio.py $O/rg/moe.csv _rg2 2>&1 | head -6
cd $O && rm -f rg/blocks.json && tar czf ../c5.tgz . && cd .. && rm -rf $O
