#!/usr/bin/env bash
# s43 call 6: where a half tile's K block spends its time, per instruction. ncu's warp-state sampling (SourceCounters,
# WarpStateStats) of one fused launch of main's lean kernel (build/main43.tar.xz: main's bench_moe and this session's
# mainloop_probe, stripped) on V4-Pro at 2048 tokens, 32 CTAs (every tile a half tile), and of the probe's
# short-tma-k kernel (the same loads and consumer, no tile structure) on 32 CTAs from HBM.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/main43.tar.xz -C build/bench/moe
source scripts/moe-env.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
timeout 200 $NCU -k regex:moe_fused_kernel -c 1 --section SourceCounters --section WarpStateStats -o $OUT/kern \
  build/bench/moe/bench_moe --out $OUT/b --shapes deepseek-v4-pro --tokens 2048 --routing balanced --precision w8a8 \
  --orders interleaved --ctas 32 --worlds 1 --check-tokens 1 --no-time > $OUT/kern_run.txt 2>&1
echo "kernel ncu rc=$?"; tail -3 $OUT/kern_run.txt
# short_tma_kernel launches: short-tma (warm-up + 5), then short-tma-k: skip 6
timeout 200 $NCU -k regex:short_tma_kernel --launch-skip 6 -c 1 --section SourceCounters --section WarpStateStats \
  -o $OUT/probe build/bench/moe/mainloop_probe --pipe-only --src-mb 16384 --ctas 32 --kblocks 2048 > $OUT/probe_run.txt 2>&1
echo "probe ncu rc=$?"; tail -3 $OUT/probe_run.txt
for r in kern probe; do
  $NCU --import $OUT/$r.ncu-rep --page source --print-source sass --csv 2> /dev/null | gzip > $OUT/src_$r.csv.gz
  $NCU --import $OUT/$r.ncu-rep --page details --csv 2> /dev/null | gzip > $OUT/details_$r.csv.gz
  echo "$r: $(zcat $OUT/src_$r.csv.gz | wc -l) source lines"
done
rm -f $OUT/*.ncu-rep $OUT/b/blocks.json
cd $OUT && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
