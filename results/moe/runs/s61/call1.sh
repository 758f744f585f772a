#!/usr/bin/env bash
# s61 call 1 (nvidia-h200): main ea32cf9 (s60's final library: every Linear-1 tile first, auto's revised rule in the
# harness itself, no re-analysis). The MoE layer GPU tests (emulated P = 2, 4, 8 among them), the Python MoE tests
# (every order of xstage.moe.ORDERS, "l1-first" included), then the P = 1 table (scripts/moe-study.sh
# STEPS="w8 w4 merge"). Carry build/s61.tar.xz (bench_moe, test_moe_layer_gpu, libxstage_attention.so; stripped).
#   OUT=$OUT bash results/moe/runs/s61/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/bench/moe build/tests/moe_gpu build/src/kernels/attention && tar xJf build/s61.tar.xz -C build/pk
cp build/pk/bench_moe build/bench/moe/ && cp build/pk/test_moe_layer_gpu build/tests/moe_gpu/
cp build/pk/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONDONTWRITEBYTECODE=1
O=$OUT/c1 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
el "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
PYTHONPATH=python timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
el "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
for st in w8 w4 merge; do
  left=$(( ${TABLE_END:-570} - ($(date +%s) - T0) ))
  [ $left -gt 20 ] || { el "$st skipped"; continue; }
  OUT=$O/study STEPS=$st timeout $left bash scripts/moe-study.sh >> $O/study.log 2>&1
  el "$st rc=$?"
done
grep -E "^configs|^orders" $O/study.log
python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s.get(k) for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
cd $O && rm -f study/*/blocks.json && tar czf ../c1.tgz . && cd .. && rm -rf $O
