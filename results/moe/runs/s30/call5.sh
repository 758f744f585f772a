#!/usr/bin/env bash
# s30 call 5: the DeepSeek-V4 W8A8 8192-token points with the long-block protocol of the big steps (0.3 s blocks, 0.3 s
# warm-up, two rounds, at least 5 calls per block; call 4 ran it at 32768 tokens), final kernel: a V4-Pro layer is
# ~9-10 ms, so a 0.05 s block of the table of record holds ~5 calls, and the cuBLASLt ceiling measured 1115-1153
# TFLOP/s with long blocks at 32K against 1195-1303 with short ones (call 3).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
timeout 250 build/bench/moe/bench_moe --out $OUT/big8k --precision w8a8 --tokens 8192 \
  --shapes deepseek-v4-pro,deepseek-v4-flash --orders wave,interleaved --check-tokens 1 --worlds 1 \
  --block-s 0.3 --warmup-s 0.3 --rounds 2 --min-calls 5 > $OUT/big8k.log 2>&1
echo "rc=$? t=$(( $(date +%s) - T0 ))s"; cat $OUT/big8k.log | head -12
rm -f $OUT/big8k/blocks.json
