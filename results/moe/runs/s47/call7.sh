#!/usr/bin/env bash
# s47 call 7: W4A8 with the second block's fragments loaded and expanded while the first block's RS batch runs (V: 16
# more live registers, 16-28 B of spills) against the committed kernel ff339c1 (C).
# build/s47c7.tar.xz: stripped bench_moe_C, bench_moe_V.
# W4A8 V4-Pro, DeepSeek-V3 at 8192 and 32768 tokens, balanced, Interleaved, processes C V V C.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s47c7.tar.xz -C /tmp && mv /tmp/bench_moe_C /tmp/bench_moe_V build/bench/moe/
source scripts/moe-env.sh
i=0
for x in C V V C; do
  i=$((i + 1))
  timeout 40 build/bench/moe/bench_moe_$x --out $OUT/w$x-$i --shapes deepseek-v4-pro,deepseek-v3 \
    --tokens 8192,32768 --routing balanced --precision w4a8 --orders interleaved --worlds 1 --check-tokens 1 \
    --block-s 0.04 --warmup-s 0.02 > $OUT/w$x-$i.log 2>&1
  echo "$x-$i rc=$? $(grep -E '^[a-z]' $OUT/w$x-$i.log | grep -E ' (8192|32768) ' | awk '{print substr($1,1,14), $2, $5}' | tr '\n' ' ')"
done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
