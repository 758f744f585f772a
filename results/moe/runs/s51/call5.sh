#!/usr/bin/env bash
# s51 call 5 (nvidia-h200): the fused kernel and the weighted sum of this session's build (Expert-Wave's wave size
# computed by the scheduler on the device; the weighted sum's plan-record check) against session 50's (558011d), in
# processes O N N O (scripts/moe-ab.sh: each process's own fused/unfused ratio), W8A8, 8192 tokens, skewed, both orders,
# Qwen3-30B and DeepSeek-V4-Flash, P = 1. bench_moe times launch_moe_layer for a prepared (host) plan in both builds.
# build/s51c5.tar.xz: bench_moe_old (558011d), bench_moe (this session), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/ab && tar xJf build/s51c5.tar.xz -C build/ab
O=$OUT/c5 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt
BINS="build/ab/bench_moe_old build/ab/bench_moe" OUT=$O timeout 560 bash scripts/moe-ab.sh --shapes qwen3-30b-a3b,deepseek-v4-flash \
  --tokens 8192 --routing skewed --precision w8a8 --orders wave,interleaved --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 2>&1 | tail -25
cd $O && tar czf ../call5.tgz --exclude='*.csv.gz' * && cd .. && rm -rf c5
