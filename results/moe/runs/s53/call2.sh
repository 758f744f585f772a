#!/usr/bin/env bash
# s53 call 2 (nvidia-h200): the Python MoE tests with the new test_random_valid_shapes. build/s53c2.tar.xz:
# libxstage_attention.so (the C ABI), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention
tar xJf build/s53c2.tar.xz -C build/src/kernels/attention
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c2 && mkdir -p $O
timeout 300 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -v > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
grep -E "FAILED|Error|assert" $O/test_python_moe.log | head -20
