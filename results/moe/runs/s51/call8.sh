#!/usr/bin/env bash
# s51 call 8 (nvidia-h200): the harness with every configuration planned on the device (bench_moe --plan device
# --no-time): P = 1 against the host reference and the unfused path, both orders bit-identical, emulated P = 2, 4, 8
# (each rank's routing split from the global batch, planned on the device) bit-identical to P = 1; three layers, both
# precisions and routings, 2048 tokens. build/s51c8.tar.xz: bench_moe, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s51c8.tar.xz -C build/bench/moe
source scripts/moe-env.sh
O=$OUT/c8 && mkdir -p $O
timeout 500 build/bench/moe/bench_moe --out $O/devplan --plan device --no-time --shapes dit-moe-xl,qwen3-30b-a3b,deepseek-v4-flash \
  --tokens 2048 --routing balanced,skewed --precision w8a8,w4a8 --orders wave,interleaved --worlds 1,2,4,8 \
  --emulated-tokens 2048 > $O/devplan.log 2>&1
echo "bench_moe --plan device rc=$?"; grep -E "emulated P|yes$| no$|DIFFER|rror" $O/devplan.log | head -60
cd $O && tar czf ../call8.tgz * && cd .. && rm -rf c8
