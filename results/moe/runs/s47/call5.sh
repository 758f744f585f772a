#!/usr/bin/env bash
# s47 call 5: W4A8 with 5 stages, a half tile's two batches issued together (N, call 4's) against 5 stages with the
# batches one at a time (S: the same sources with the together branch compiled out).
# build/s47c5.tar.xz: stripped bench_moe_N, bench_moe_S.
# W4A8 V4-Pro, V4-Flash, DeepSeek-V3 at 2048 and 8192 tokens, balanced and skewed, Interleaved, processes N S S N.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s47c5.tar.xz -C /tmp && mv /tmp/bench_moe_N /tmp/bench_moe_S build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
i=0
for x in N S S N; do
  i=$((i + 1))
  timeout 70 build/bench/moe/bench_moe_$x --out $OUT/w$x-$i --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 \
    --tokens 2048,8192 --routing balanced,skewed --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
    --block-s 0.05 --warmup-s 0.03 > $OUT/w$x-$i.log 2>&1
  echo "$x-$i rc=$? $(grep -E '^[a-z]' $OUT/w$x-$i.log | grep -E ' (2048|8192) ' | awk '{print substr($1,1,14), $2, $3, $5}' | tr '\n' ' ')"
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
