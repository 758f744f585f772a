#!/usr/bin/env bash
# s50 call 2 (nvidia-h200): xstage.moe's tests after the fix of call 1's failures (the layer's quantized inputs were
# freed, and their memory reused by the next rank's, before the kernel was enqueued), then bench/moe/torch_moe.py:
# the layer called from torch against a torch bf16 grouped-GEMM MoE, by the protocol. build/s50c1.tar.xz as call 1.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c1.tar.xz -C build/src/kernels/attention
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c2 && mkdir -p $O
timeout 240 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -v > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
grep -E "^E  " $O/test_python_moe.log | head -20
timeout 300 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,dit-moe-xl,deepseek-v4-flash --tokens 8192 \
  --json $O/torch_moe.json > $O/torch_moe.log 2>&1
echo "torch_moe rc=$?"; cat $O/torch_moe.log | cut -c1-190 | tail -40
cd $O && tar czf ../call2.tgz * && cd .. && rm -rf c2
