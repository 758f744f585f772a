#!/usr/bin/env bash
# s36 call 1: what a tail riding on its full row's tile would buy the 8K V4-Pro layers (a diagnostic build, not
# committed: tail-ride-debug.patch, against 85dd36e). XSTAGE_DEBUG_TAIL bit 1: an expert's last row of at most 16 tokens
# after a full row is not walked at all (neither its Linear-1 nor its Linear-2 tiles); bit 2: every full tile whose
# expert has such a tail pays what the tail's swap-AB batches would cost its consumers (per K block two m64n16k32 x 4
# batches on the stage's weights, waited for and promoted into 16 more finals). Values 1 and 3 give wrong results on
# purpose (the skipped rows' combine entries are never written: `ok NO`). bench_moe = main's build (85dd36e),
# bench_moe_diag = the diagnostic build. Processes in the order a: M D0 P1 F R, b: R F P1 D0 M.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
run() {  # $1 tag, $2 binary, $3 XSTAGE_DEBUG_TAIL, rest: bench args
  local tag=$1 bin=$2 v=$3; shift 3
  export XSTAGE_DEBUG_TAIL=$v
  timeout 90 build/bench/moe/$bin --out $OUT/$tag "$@" --shapes deepseek-v4-pro --tokens 8192 --routing balanced,skewed \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 > $OUT/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^deepseek' $OUT/$tag.log | awk '{print $3, $5, $7, $10}' | tr '\n' ' ')"
}
for rep in a b; do
  if [ $rep = a ]; then order="M D0 P1 F R"; else order="R F P1 D0 M"; fi
  for x in $order; do
    case $x in
      M) run M_$rep bench_moe 0 ;;
      D0) run D0_$rep bench_moe_diag 0 ;;
      P1) run P1_$rep bench_moe_diag 0 --pair-share 1 ;;
      F) run F_$rep bench_moe_diag 1 --pair-share 1 ;;
      R) run R_$rep bench_moe_diag 3 --pair-share 1 ;;
    esac
  done
done
unset XSTAGE_DEBUG_TAIL
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
