#!/usr/bin/env bash
# s52 call x2f (nvidia-h200-x2): bench/moe/torch_moe_ep.py with skewed routing (Zipf(1) popularity over a random expert
# order: the two ranks' loads differ), six shapes at 8192 tokens per rank. Same tarball as call-x2a.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention
tar xJf build/s52x2.tar.xz -C /tmp ./libxstage_attention.so && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/x2f && mkdir -p $O
timeout 400 torchrun --nproc-per-node 2 bench/moe/torch_moe_ep.py --routing skewed \
  --shapes dit-moe-xl,qwen3-30b-a3b,qwen3-235b-a22b,deepseek-v3,deepseek-v4-flash,glm-flash \
  --tokens 8192 --json $O/torch_moe_ep_8192_skewed.json > $O/torch_moe_ep_8192_skewed.log 2>&1
echo "torch_moe_ep skewed rc=$?"; grep -vE "^W1204|^\*+$|OMP_NUM_THREADS" $O/torch_moe_ep_8192_skewed.log | tail -40
