#!/usr/bin/env bash
# s52 call 2 (nvidia-h200): after the out / x_scale / topk_weight alignment checks (RejectsBadInput's new cases): the MoE
# layer GPU tests and the Python MoE tests. build/s52c2.tar.xz: test_moe_layer_gpu, libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu
tar xJf build/s52c2.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/; mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c2 && mkdir -p $O
timeout 300 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
