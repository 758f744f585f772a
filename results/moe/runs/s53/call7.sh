#!/usr/bin/env bash
# s53 call 7 (nvidia-h200): the Python MoE tests after xstage_moe_auto_order took a token count (auto_order(tokens=n)). build/s53c7.tar.xz:
# libxstage_attention.so (the C ABI), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention
tar xJf build/s53c7.tar.xz -C build/src/kernels/attention
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c7 && mkdir -p $O
timeout 300 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -v > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
grep -E "FAILED|Error|assert" $O/test_python_moe.log | head -20
