#!/usr/bin/env bash
# s51 call 7 (nvidia-h200): the device plan with the scan folded into plan_hist's last CTA (three launches; commit 43022d0,
# reverted after this call: not faster). As call 4:
# test_moe_layer_gpu, the Python MoE tests, memcheck /
# racecheck / synccheck on the device-plan cases, plan_bench and torch_moe.py at 2K and 8K as call 3.
# build/s51c7.tar.xz: test_moe_layer_gpu, libxstage_attention.so, plan_bench, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu build/bench/moe && tar xJf build/s51c7.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/; mv /tmp/plan_bench build/bench/moe/
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c7 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt
timeout 240 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head -20
timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "python rc=$? $(tail -1 $O/test_python_moe.log)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 150 $CS --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.DevicePlanRejectsBadRouting:MoeLayerGpu.DevicePlanTablesManyExperts:MoeLayerGpu.EmulatedP2' \
    > $O/sanitizer_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/sanitizer_$tool.log | tr '\n' ' ')"
done
timeout 200 build/bench/moe/plan_bench --worlds 1,8 --batches 5 --calls 10 --json $O/plan_bench.json > $O/plan_bench.log 2>&1
echo "plan_bench rc=$?"; cat $O/plan_bench.log
for T in 2048 8192; do
  timeout 200 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens $T \
    --backends xstage,xstage-hostplan,torch-bf16 --block 0.3 --warmup 0.2 --json $O/torch_moe_$T.json > $O/torch_moe_$T.log 2>&1
  echo "torch_moe $T rc=$?"; grep -E "^==|  xstage|torch-bf16  |plan\) vs|Error|error" $O/torch_moe_$T.log | cut -c1-150
done
cd $O && tar czf ../call7.tgz * && cd .. && rm -rf c7
