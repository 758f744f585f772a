#!/usr/bin/env bash
# s45 call 8: W4A8 with the int4 weights expanded by the pre-pass (all SMs, before the fused kernel) beside the default
# in-kernel expansion (three epilogue warps per SM), on c76f6b5's kernel: `bench_moe --compare-expand` (backend
# suffix _pre), W4A8 2K and 8K, V4-Pro, V4-Flash, DeepSeek-V3, Qwen3-235B, balanced, Interleaved, two processes.
# build/study45.tar.xz: c76f6b5's bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/study45.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for i in 1 2; do
  el "process $i"
  timeout 150 build/bench/moe/bench_moe --out $OUT/x$i --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,qwen3-235b-a22b \
    --tokens 2048,8192 --routing balanced --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
    --compare-expand --block-s 0.05 --warmup-s 0.03 > $OUT/x$i.log 2>&1
  echo "rc=$?"
  python3 scripts/moe-variant-ratio.py $OUT/x$i/moe.csv _pre 2>&1 | tail -14
done
el done
cd $OUT && rm -f */blocks.json && tar czf call8.tgz --exclude=call8.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call8.tgz -exec rm -rf {} +
