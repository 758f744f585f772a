#!/usr/bin/env bash
# s31 call 8 (run inline on the warm machine right after call 7, same binaries): more lane sizes on V4-Pro 8K W8A8,
# Interleaved: skewed 48-72 CTAs, balanced 8-24.
source scripts/moe-env.sh
for spec in "skewed 48,56,64,72" "balanced 8,12,16,24"; do
  set -- $spec
  timeout 60 build/bench/moe/bench_moe --out $OUT/l_$1 --shapes deepseek-v4-pro --tokens 8192 --routing $1 --precision w8a8 \
    --orders interleaved --compare-lane $2 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/l_$1.log 2>&1
  echo "rc=$?"; grep fused_inter $OUT/l_$1/moe.csv | cut -d, -f7,10,11,15,16,17; grep ceiling $OUT/l_$1/moe.csv | cut -d, -f7,10,11,15
done
rm -f $OUT/*/blocks.json
