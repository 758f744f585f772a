#!/usr/bin/env bash
# s51 call 10 (nvidia-h200): call 9's A/B again where it read 1.6 % (Qwen3-30B, 8192 tokens, skewed, W8A8, both orders),
# with four processes per build (scripts/moe-ab.sh with BINS "old new old new": O N O N N O N O). build/s51c9.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/ab && tar xJf build/s51c9.tar.xz -C /tmp && mv /tmp/bench_moe /tmp/bench_moe_old build/ab/
O=$OUT/c10 && mkdir -p $O
BINS="build/ab/bench_moe_old build/ab/bench_moe build/ab/bench_moe_old build/ab/bench_moe" OUT=$O timeout 300 \
  bash scripts/moe-ab.sh --shapes qwen3-30b-a3b --tokens 8192 --routing skewed --precision w8a8 --orders wave,interleaved \
  --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 2>&1 | grep -E "^rc|variant|build_ab" | cut -c1-160
cd $O && tar czf ../call10.tgz --exclude='*.csv.gz' * && cd .. && rm -rf c10
