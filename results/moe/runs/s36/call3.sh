#!/usr/bin/env bash
# s36 call 3: is the pipeline's depth what bounds the 8K V4 layers? The diagnostic build of call 2 (bench_moe_diag, 4
# stages of 48 KB) beside the same sources built with XSTAGE_MOE_STAGES=3 (bench_moe_diag3, 3 stages; nothing else
# changes), at XSTAGE_DEBUG_TAIL 0 (the real layer), 12 (no tensor work: data delivery alone) and 28 (no weights and no
# tensor work: the pipeline's A boxes, epilogue, dispatch and weighted sum). If a stage's round trip (load latency plus
# the time the consumers hold it) bounds the rate, 3 stages take about 4/3 the time wherever the consumers are not the
# bound. Processes in the order a: S4v0 S3v0 S4v12 S3v12 S4v28 S3v28, b: the reverse.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
run() {  # $1 tag, $2 binary, $3 XSTAGE_DEBUG_TAIL
  local tag=$1 bin=$2 v=$3
  export XSTAGE_DEBUG_TAIL=$v
  timeout 90 build/bench/moe/$bin --out $OUT/$tag --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
    --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.1 \
    --warmup-s 0.05 > $OUT/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^deepseek' $OUT/$tag.log | awk '{print substr($1,13), $3, $5, $7, $10}' | tr '\n' ' ')"
}
for x in "S4v0_a diag 0" "S3v0_a diag3 0" "S4v12_a diag 12" "S3v12_a diag3 12" "S4v28_a diag 28" "S3v28_a diag3 28" \
         "S3v28_b diag3 28" "S4v28_b diag 28" "S3v12_b diag3 12" "S4v12_b diag 12" "S3v0_b diag3 0" "S4v0_b diag 0"; do
  set -- $x
  run $1 bench_moe_$2 $3
done
unset XSTAGE_DEBUG_TAIL
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
