#!/usr/bin/env bash
# s50 call 14 (nvidia-h200): after the review mend (xstage.moe's one block-quantization helper, torch_moe.py's shared
# grouped-layer skeleton, tests/moe_gpu/moe_cases.py): xstage.moe's tests, the two-rank worker under torchrun with one
# process, torch_moe.py on Qwen3-30B (all four backends, short blocks). build/s50c12.tar.xz as call 12.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c12.tar.xz -C /tmp && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c14 && mkdir -p $O
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
timeout 120 torchrun --nproc-per-node 1 tests/moe_gpu/moe_two_ranks.py > $O/torchrun1.log 2>&1; echo "torchrun 1 rc=$?"
grep -E "rank|PASS" $O/torchrun1.log | head -3
timeout 120 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b --tokens 8192 --block 0.3 --warmup 0.2 \
  --json $O/torch_moe.json > $O/torch_moe.log 2>&1
echo "torch_moe rc=$?"; grep -E "relative|xstage|torch-" $O/torch_moe.log | cut -c1-150
cd $O && tar czf ../call14.tgz * && cd .. && rm -rf c14
