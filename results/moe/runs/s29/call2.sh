#!/usr/bin/env bash
# s29 call 2: stream_probe with the mixed runs (DRAM-streaming "half tiles" on some SMs beside L2-fed "full tiles" on
# the rest: can an SM stream a small expert's weights faster than the ~45 GB/s the kernel's half tiles reach?), then
# the per-tile trace of V4-Pro 8K W8A8 (Interleaved) with CTA pairs (auto) and with single CTAs (--cluster 1), to see
# whether the pairs' lockstep bounds the half tiles.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el probe
timeout 120 build/bench/moe/stream_probe --gb 16 --k 7168 --reps 3 --csv $OUT/stream.csv > $OUT/stream.log 2>&1
echo "probe rc=$?"; sed -n '/^mixed/,$p' $OUT/stream.log
for cl in 0 1; do
  el "trace cluster $cl"
  timeout 90 build/bench/moe/bench_moe --out $OUT/trace_c$cl --shapes deepseek-v4-pro --tokens 8192 --precision w8a8 \
    --orders interleaved --cluster $cl --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 --trace \
    --trace-csv $OUT/trace_c$cl/tiles.csv > $OUT/trace_c$cl.log 2>&1
  echo "trace rc=$?"; gzip -f $OUT/trace_c$cl/tiles.csv
  grep -E "fused|ceiling" $OUT/trace_c$cl/moe.csv | cut -d, -f7,10,11,15 | head -8
done
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
