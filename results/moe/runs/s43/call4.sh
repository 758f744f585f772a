#!/usr/bin/env bash
# s43 call 4: call 3's diagnostic build traced (per-tile mainloop, data wait, first wait, gap), V4-Pro 2K on 32 CTAs,
# CTA pairs (auto), XSTAGE_DEBUG_TAIL 0, 16 (no weight loads), 24 (no weights, no tensor work), 8 (no tensor work).
# The traced kernel of this build spills (160 B of stores): its times are longer than the untimed kernel's; the
# per-kind split is what counts. python3 scripts/moe-trace-kinds.py prints the tables.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/dbg43.tar.xz -C build/bench/moe
source scripts/moe-env.sh
for b in 0 16 24 8; do
  mkdir -p $OUT/t$b
  XSTAGE_DEBUG_TAIL=$b timeout 120 build/bench/moe/bench_moe_dbg --out $OUT/t$b --shapes deepseek-v4-pro \
    --tokens 2048 --routing balanced --precision w8a8 --orders interleaved --ctas 32 --worlds 1 \
    --check-tokens 1 --block-s 0.02 --warmup-s 0.01 --trace --trace-csv $OUT/t$b/tiles.csv > $OUT/t$b.log 2>&1
  echo "bits $b rc=$? $(grep -E '^deepseek' $OUT/t$b.log | awk '{print "fused", $5, "ms"}')"
  python3 scripts/moe-trace-kinds.py $OUT/t$b/tiles.csv | grep -v '^    '
  gzip -f $OUT/t$b/tiles.csv
done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
