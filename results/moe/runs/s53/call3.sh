#!/usr/bin/env bash
# s53 call 3 (nvidia-h200): the fused layer against the unfused cuBLASLt path at token counts below the grid's (128 and
# 512 tokens per rank, P = 1, W8A8 and W4A8, balanced routing, every shape): issue 11's grid starts at 2048; a user with
# small batches should know whether fusion still pays there. build/s53c3.tar.xz: bench_moe (HEAD), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s53c3.tar.xz -C build/bench/moe
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O
for p in w8a8 w4a8; do
  timeout 270 build/bench/moe/bench_moe --out $O/$p --shapes all --tokens 128,512 --routing balanced --precision $p \
    --orders wave,interleaved --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $O/$p.log 2>&1
  echo "$p rc=$?"; tail -4 $O/$p.log
done
