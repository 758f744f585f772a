#!/usr/bin/env bash
# s36 call 4: the stream probe (bench/moe/stream_probe.cu, main's plus the s36 rows: stages 3-6 against a consumer hold
# of 600 / 1000 ns per stage, weights alone and with a half tile's 8 KB A box, on all SMs and on half of them). Does a
# deeper ring raise a CTA's weight stream while its consumer holds each stage (docs/MOE.md "Session 36", item 3)?
# Two runs, 3 timed launches per row each.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C build/bench/moe
source scripts/moe-env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for r in 1 2; do
  build/bench/moe/stream_probe --reps 3 --csv $OUT/stream$r.csv > $OUT/stream$r.log 2>&1
  echo "run $r rc=$?"
done
head -3 $OUT/stream1.log
tail -24 $OUT/stream1.log
tail -20 $OUT/stream2.log
