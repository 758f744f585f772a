#!/usr/bin/env bash
# s50 call 6 (nvidia-h200): the two-rank worker of test_python_moe.py (moe_two_ranks.py) under torchrun with one
# process (a real team of one: the script's path, not the NCCL gather, which needs two GPUs), and the pytest module
# (its two-GPU test skips here). build/s50c4.tar.xz as call 4.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c4.tar.xz -C /tmp && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c6 && mkdir -p $O
timeout 200 torchrun --nproc-per-node 1 tests/moe_gpu/moe_two_ranks.py > $O/torchrun1.log 2>&1; echo "torchrun 1 rc=$?"
grep -E "rank|PASS|Error|error" $O/torchrun1.log | head
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -2 $O/test_python_moe.log | tr '\n' ' ')"
cd $O && tar czf ../call6.tgz * && cd .. && rm -rf c6
