#!/usr/bin/env bash
# s34 call 1 (bench_moe carried as build/bins.tar.xz): does an L2 prefetch raise the rate a streamed half tile
# gets per SM? V4-Pro 2K (every tile a half tile) on 32 CTAs: the lean default, the full kernel (_l0) and the full
# kernel prefetching the weights D K blocks ahead (_pfD); then V4-Pro 8K both routings on 132 CTAs with the
# prefetch for every tile (_pfD) and for the single short rows only (_psD).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
B=build/bench/moe/bench_moe
for c in 32 132; do
el "2K on $c CTAs"
timeout 150 $B --out $OUT/p2k_c$c --shapes deepseek-v4-pro --tokens 2048 --routing balanced --precision w8a8 \
  --orders interleaved --ctas $c --compare-lean --prefetch 2,4,8,16 --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 > $OUT/p2k_c$c.log 2>&1
echo "rc=$?"; tail -1 $OUT/p2k_c$c.log
for v in _l0 _pf2 _pf4 _pf8 _pf16; do python3 scripts/moe-variant-ratio.py $OUT/p2k_c$c/moe.csv $v | head -1; done
done
el "8K"
timeout 240 $B --out $OUT/p8k --shapes deepseek-v4-pro --tokens 8192 --routing skewed,balanced --precision w8a8 \
  --orders interleaved --compare-lean --prefetch 8,16,32 --prefetch-streamed --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/p8k.log 2>&1
echo "rc=$?"; tail -1 $OUT/p8k.log
for v in _l0 _pf8 _pf16 _pf32 _ps8 _ps16 _ps32; do python3 scripts/moe-variant-ratio.py $OUT/p8k/moe.csv $v | head -2; done
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
