#!/usr/bin/env bash
# s51 call 2 (nvidia-h200): what the dispatch plan costs per call (bench/moe/plan_bench: made on the device against
# made on the host, every layer, 2048 / 8192 / 32768 global tokens, balanced and skewed, P = 1 and 8 emulated), and the
# whole Python call with each plan beside torch on two more layers and at 2048 tokens (torch_moe.py).
# build/s51c2.tar.xz: plan_bench; build/s51c1.tar.xz: libxstage_attention.so (call 1's build; nothing changed since).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/bench/moe && tar xJf build/s51c1.tar.xz -C /tmp && tar xJf build/s51c2.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/; mv /tmp/plan_bench build/bench/moe/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c2 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt
timeout 300 build/bench/moe/plan_bench --worlds 1,8 --batches 5 --calls 10 --json $O/plan_bench.json > $O/plan_bench.log 2>&1
echo "plan_bench rc=$?"; cat $O/plan_bench.log
timeout 240 python3 bench/moe/torch_moe.py --shapes dit-moe-xl,glm-flash --tokens 8192 \
  --backends xstage,xstage-hostplan,torch-bf16 --block 0.3 --warmup 0.2 --json $O/torch_moe_8k.json > $O/torch_moe_8k.log 2>&1
echo "torch_moe 8k rc=$?"; grep -E "^==|xstage|torch-|Error|error" $O/torch_moe_8k.log | cut -c1-170
timeout 200 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 2048 \
  --backends xstage,xstage-hostplan,torch-bf16 --block 0.3 --warmup 0.2 --json $O/torch_moe_2k.json > $O/torch_moe_2k.log 2>&1
echo "torch_moe 2k rc=$?"; grep -E "^==|xstage|torch-|Error|error" $O/torch_moe_2k.log | cut -c1-170
cd $O && tar czf ../call2.tgz * && cd .. && rm -rf c2
