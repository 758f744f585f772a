#!/usr/bin/env bash
# s52 call x2d (nvidia-h200-x2): bench/moe/torch_moe_ep.py (call x2c's) on six shapes at 8192 and 2048 tokens per rank
# (DeepSeek-V4-Pro left out: its float32 reference weights of all 384 experts, ~100 GB, do not fit beside the rest).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention
tar xJf build/s52x2.tar.xz -C /tmp ./libxstage_attention.so && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/x2d && mkdir -p $O
for T in 8192 2048; do
  timeout 270 torchrun --nproc-per-node 2 bench/moe/torch_moe_ep.py \
    --shapes dit-moe-xl,qwen3-30b-a3b,qwen3-235b-a22b,deepseek-v3,deepseek-v4-flash,glm-flash \
    --tokens $T --json $O/torch_moe_ep_$T.json > $O/torch_moe_ep_$T.log 2>&1
  echo "torch_moe_ep T=$T rc=$?"; grep -vE "^W1204|^\*+$|OMP_NUM_THREADS" $O/torch_moe_ep_$T.log | tail -30
done
