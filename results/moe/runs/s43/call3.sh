#!/usr/bin/env bash
# s43 call 3: why does the kernel's half tile stream ~50 GB/s per SM where few SMs stream, when the probe's
# short-tma-k gets ~84? V4-Pro at 2048 tokens on 32 CTAs (every tile a half tile; its weights, 25.4 GB, from HBM)
# with a diagnostic build (debug-s43.patch: session 36's XSTAGE_DEBUG_TAIL bits plus bit 32), values in one process
# each: 0 (the kernel), 8 (half tiles: no tensor work, each stage released in the next one's shadow), 40 (8 and each
# stage released at once, as the probe's short-none), 16 (no weight loads), 24, 56; CTA pairs (auto) and single
# CTAs (--cluster 1) for 0 and 40. The probe's half-tile rows on 32 CTAs from HBM beside it. Results are wrong on
# purpose for every value but 0 (the harness says so); only the times count.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/dbg43.tar.xz -C build/bench/moe
source scripts/moe-env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
build/bench/moe/mainloop_probe --pipe-only --src-mb 16384 --ctas 32 > $OUT/probe32.log 2>&1
echo "probe rc=$?"; grep -E '^(variant|short|l1-tma-mix)' $OUT/probe32.log
run() {  # $1 debug bits, $2 cluster
  XSTAGE_DEBUG_TAIL=$1 timeout 120 build/bench/moe/bench_moe_dbg --out $OUT/b$1c$2 --shapes deepseek-v4-pro \
    --tokens 2048 --routing balanced --precision w8a8 --orders interleaved --ctas 32 --cluster $2 --worlds 1 \
    --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/b$1c$2.log 2>&1
  echo "bits $1 cluster $2 rc=$? $(grep -E '^deepseek' $OUT/b$1c$2.log | awk '{print "fused", $5, "ms"}')"
}
for v in "0 0" "8 0" "40 0" "16 0" "24 0" "56 0" "0 1" "40 1" "0 0"; do run $v; done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
