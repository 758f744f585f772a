#!/usr/bin/env bash
# s51 call 11 (nvidia-h200): after the review mend (the prepared state keeps which plan, its table offsets and the host
# plan's rows instead of the whole host DispatchPlan; prepare_device_plan a friend of the workspace): the MoE layer GPU
# tests and the Python MoE tests, memcheck on the device-plan and graph cases. build/s51c11.tar.xz: test_moe_layer_gpu,
# libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu && tar xJf build/s51c11.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/; mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c11 && mkdir -p $O
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
timeout 150 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "python rc=$? $(tail -n 1 $O/test_python_moe.log)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 100 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.CapturedCallsReplay:MoeLayerGpu.DevicePlanRejectsBadRouting:MoeLayerGpu.TraceRecordsEveryTile' \
  > $O/sanitizer_memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/sanitizer_memcheck.log | tr '\n' ' ')"
cd $O && tar czf ../call11.tgz * && cd .. && rm -rf c11
