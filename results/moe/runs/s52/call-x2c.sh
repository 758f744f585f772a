#!/usr/bin/env bash
# s52 call x2c (nvidia-h200-x2): the MoE layer from PyTorch with expert parallelism over two real ranks against the
# torch EP layer (all_to_all_single dispatch / combine around torch._grouped_mm, bf16 and FP8 rowwise), in the same
# processes under torchrun (bench/moe/torch_moe_ep.py). Same tarball as call-x2a (libxstage_attention.so).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention
tar xJf build/s52x2.tar.xz -C /tmp ./libxstage_attention.so && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/x2c && mkdir -p $O
nvidia-smi -L
timeout 540 torchrun --nproc-per-node 2 bench/moe/torch_moe_ep.py --shapes qwen3-30b-a3b,deepseek-v4-flash,dit-moe-xl \
  --tokens 8192 --json $O/torch_moe_ep.json > $O/torch_moe_ep.log 2>&1
echo "torch_moe_ep rc=$?"; grep -vE "^W1204|^\*+$|OMP_NUM_THREADS" $O/torch_moe_ep.log | tail -30
