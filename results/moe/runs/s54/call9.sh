#!/usr/bin/env bash
# s54 call 9 (nvidia-h200): the Python MoE tests on the final library (after the review mend: the lagged Expert-Wave
# time simulated at P = 1 only; test_auto_order runs P = 1 and emulated P = 2). build/s54c9.tar.xz: libxstage_attention.so.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/src/kernels/attention && tar xJf build/s54c9.tar.xz -C build/pk
mv build/pk/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c9 && mkdir -p $O
timeout 150 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
