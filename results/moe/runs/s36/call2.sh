#!/usr/bin/env bash
# s36 call 2 (the diagnostic build of call 1 plus two bits, tail-ride-debug.patch, not committed): XSTAGE_DEBUG_TAIL
# bit 4: the consumers of every full tile (Linear-1 and Linear-2) only wait for each stage and release it, no tensor
# work; bit 8: the same for every half tile; bit 16: no tile loads its weights (the stages hold A, the A scales and
# whatever B bytes were there). 12 = no tile does tensor work: the layer's time is then what the producer's loads, the
# epilogue, the dispatch and the weighted sum take; 16 = the layer without its weight stream; 28 = neither. Results are
# wrong on purpose for every value but 0. Values 0 / 4 / 12 / 16 / 28, processes in the order a: 0 4 12 16 28, b: 28 16
# 12 4 0; the four V4 8K layers, default CTA pairs.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
run() {  # $1 tag, $2 XSTAGE_DEBUG_TAIL, rest: bench args
  local tag=$1 v=$2; shift 2
  export XSTAGE_DEBUG_TAIL=$v
  timeout 90 build/bench/moe/bench_moe_diag --out $OUT/$tag "$@" --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^deepseek' $OUT/$tag.log | awk '{print substr($1,13), $3, $5, $7, $10}' | tr '\n' ' ')"
}
for v in 0 4 12 16 28; do run v${v}_a $v; done
for v in 28 16 12 4 0; do run v${v}_b $v; done
unset XSTAGE_DEBUG_TAIL
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
