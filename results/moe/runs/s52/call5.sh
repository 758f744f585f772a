#!/usr/bin/env bash
# s52 call 5 (nvidia-h200; the two-GPU machine was no longer lent): after the review mend that made torch_moe.py and
# torch_moe_ep.py share the layer's pieces (routing with optional weights, swiglu_experts, bf16_linears, fp8_linears):
# torch_moe.py at P = 1 and torch_moe_ep.py under torchrun with one rank (its EP path: all_to_all_single with a world of
# one, a real team of one), balanced and skewed, one shape each, to check that the scripts run and their checks pass.
# build/s52c2.tar.xz (call 2's: the final libxstage_attention.so).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention
tar xJf build/s52c2.tar.xz -C /tmp ./libxstage_attention.so && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c5 && mkdir -p $O
timeout 150 python3 bench/moe/torch_moe.py --shapes deepseek-v4-flash --tokens 8192 \
  --backends xstage,torch-bf16,torch-fp8 --block 0.3 --json $O/torch_moe_p1.json > $O/torch_moe_p1.log 2>&1
echo "torch_moe P=1 rc=$?"; tail -12 $O/torch_moe_p1.log
for r in balanced skewed; do
  timeout 150 torchrun --nproc-per-node 1 bench/moe/torch_moe_ep.py --routing $r --shapes deepseek-v4-flash \
    --tokens 8192 --json $O/torch_moe_ep_$r.json > $O/torch_moe_ep_$r.log 2>&1
  echo "torch_moe_ep $r rc=$?"; grep -vE "^W1204|^\*+$|OMP_NUM_THREADS" $O/torch_moe_ep_$r.log | tail -6
done
