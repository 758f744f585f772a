#!/usr/bin/env bash
# s53 call 9 (nvidia-h200): after the review mend of prepare_device_plan (offsets computed once, one loop; no behaviour
# change): the MoE layer GPU tests, memcheck on the device-plan tests, the Python MoE tests.
# build/s53c9.tar.xz: test_moe_layer_gpu and libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
tar xJf build/s53c9.tar.xz -C /tmp
mkdir -p build/tests/moe_gpu build/src/kernels/attention
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/ && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c9 && mkdir -p $O
timeout 300 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 150 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.DevicePlanTablesManyExperts' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tr '\n' ' ')"
timeout 100 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
