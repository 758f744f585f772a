#!/usr/bin/env bash
# s51 call 1 (nvidia-h200): the dispatch plan on the device. test_moe_layer_gpu (every run_case also with the device
# plan: tables equal to the host plan's, output bit-identical; DevicePlanRejectsBadRouting; a real team of one with
# both plans), test_moe_schedulers, the Python MoE tests (both plans), compute-sanitizer memcheck and racecheck on
# the device-plan cases, then torch_moe.py: the whole Python call with the device plan against the host plan and torch.
# build/s51c1.tar.xz: test_moe_layer_gpu, test_moe_schedulers, libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu build/tests/sched && tar xJf build/s51c1.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/; mv /tmp/test_moe_schedulers build/tests/sched/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c1 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt
timeout 240 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|error" $O/test_moe_layer_gpu.log | head -20
timeout 60 build/tests/sched/test_moe_schedulers > $O/test_moe_schedulers.log 2>&1; echo "sched rc=$? $(tail -1 $O/test_moe_schedulers.log)"
timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "python rc=$? $(tail -1 $O/test_python_moe.log)"; grep -E "FAILED|Error" $O/test_python_moe.log | head -10
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 150 $CS --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.DevicePlanRejectsBadRouting:MoeLayerGpu.EmulatedP2:MoeLayerGpu.SingleRankPartialTiles' \
    > $O/sanitizer_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/sanitizer_$tool.log | tr '\n' ' ')"
done
timeout 200 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 8192 \
  --backends xstage,xstage-hostplan,torch-bf16 --block 0.3 --warmup 0.2 --json $O/torch_moe.json > $O/torch_moe.log 2>&1
echo "torch_moe rc=$?"; grep -E "^==|xstage|torch-|Error|error" $O/torch_moe.log | cut -c1-170
cd $O && tar czf ../call1.tgz * && cd .. && rm -rf c1
