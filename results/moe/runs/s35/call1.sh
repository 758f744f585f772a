#!/usr/bin/env bash
# s35 call 1 (a diagnostic build, not committed: null-half-a-debug.patch, against a8f2af9). XSTAGE_DEBUG_NULL_HALF:
# bit 0 = the consumers of a half Linear-1 tile that loads its own weights skip its tensor work (s34 call 4's switch),
# bit 1 = that tile's producer skips its A box (the stage expects the weights and A scales only). Results of 1 and 3
# are wrong on purpose. Where does a streamed half tile's data delivery go: V4-Pro 2K on 32 CTAs (every tile a half
# tile), Interleaved, values 0 / 1 / 3, CTA pairs (auto) and single CTAs (--cluster 1), alternating processes; the same
# three on V4-Pro 8K skewed (132 CTAs); then the stream probe's pipeline variants from HBM on 32 CTAs.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp && mv /tmp/bench_moe /tmp/mainloop_probe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
B=build/bench/moe/bench_moe
run() {  # $1 tag, $2 XSTAGE_DEBUG_NULL_HALF, rest: bench args
  local tag=$1 v=$2; shift 2
  export XSTAGE_DEBUG_NULL_HALF=$v
  timeout 90 $B --out $OUT/$tag "$@" --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 \
    --block-s 0.1 --warmup-s 0.05 > $OUT/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^deepseek' $OUT/$tag.log | awk '{print $1, $3, $5}' | tr '\n' ' ')"
}
for rep in a b; do
  for cl in 0 1; do
    for v in 0 1 3; do
      run n${v}_c${cl}_$rep $v --shapes deepseek-v4-pro --tokens 2048 --routing balanced --ctas 32 --cluster $cl
    done
  done
done
el "8K"
for rep in a b; do
  for v in 0 1 3; do
    run k8_n${v}_$rep $v --shapes deepseek-v4-pro --tokens 8192 --routing skewed
  done
done
unset XSTAGE_DEBUG_NULL_HALF
el "probe"
timeout 120 build/bench/moe/mainloop_probe --pipe-only --src-mb 16384 --kblocks 2048 --ctas 32 --json $OUT/probe32.json > $OUT/probe32.log 2>&1
echo "rc=$?"; grep -E "short|l1-tma " $OUT/probe32.log | head -12
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
