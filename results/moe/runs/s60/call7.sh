#!/usr/bin/env bash
# s60 call 7 (nvidia-h200): the Python MoE tests on the final library (every order of xstage.moe.ORDERS in each case,
# now with "l1-first", the C ABI's XSTAGE_MOE_L1_FIRST; auto's revised rule at DiT-MoE-XL 8K). Carry build/s60py.tar.xz
# (libxstage_attention.so, stripped).
#   OUT=$OUT bash results/moe/runs/s60/call7.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/src/kernels/attention && tar xJf build/s60py.tar.xz -C build/pk
mv build/pk/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c7 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
