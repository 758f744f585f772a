#!/usr/bin/env bash
# s34 call 4 (a diagnostic build, not committed: XSTAGE_DEBUG_NULL_HALF=1 makes the consumers of a half Linear-1 tile
# that loads its own weights skip the tensor work and the promotion: they wait for each stage and release it). What
# do the half tiles' consumers cost: V4-Pro 2K on 32 CTAs (every tile a half tile) and the V4 8K layers, the default
# and the null consumers in alternating processes (the results of the null runs are wrong on purpose). Then, on the
# default kernel, the interleaved lead at 12 and 18 rows beside the control on three shapes at 8K and 32K.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp bench_moe && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
B=build/bench/moe/bench_moe
run() {  # $1 tag, $2 env (0/1), rest: bench args
  local tag=$1 nul=$2; shift 2
  if [ "$nul" = 1 ]; then export XSTAGE_DEBUG_NULL_HALF=1; else unset XSTAGE_DEBUG_NULL_HALF; fi
  timeout 100 $B --out $OUT/$tag "$@" --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 \
    --block-s 0.1 --warmup-s 0.05 > $OUT/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^deepseek' $OUT/$tag.log | awk '{print $1, $3, $5}' | tr '\n' ' ')"
}
for rep in a b; do
  for nul in 0 1; do
    run c32_${nul}_$rep $nul --shapes deepseek-v4-pro --tokens 2048 --routing balanced --ctas 32
    run k8_${nul}_$rep $nul --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing skewed,balanced
  done
done
unset XSTAGE_DEBUG_NULL_HALF
el "leads"  # the lead at twice the knee and more, beside the identical-work control (default kernel)
timeout 300 $B --out $OUT/lead --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 --tokens 8192,32768 --precision w8a8 \
  --orders interleaved --leads 12,18 --compare-control --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/lead.log 2>&1
echo "rc=$?"; tail -1 $OUT/lead.log
for v in _D12 _D18 _ctl; do python3 scripts/moe-variant-ratio.py $OUT/lead/moe.csv $v 2>/dev/null | grep -v "fused_wave\|'fused_wave'"; done
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
