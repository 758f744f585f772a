#!/usr/bin/env bash
# s31 call 5: the per-tile trace of V4-Pro 8K skewed W8A8 (Interleaved, the traced kernel) with the rows in expert order
# and in the spread order (MoeLayerParams::row_order 1, bench --row-order 1), to see where spreading the streamed rows
# between the others (s29: 1.4 % on this point) loses what it gains.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for o in 0 1; do
  el "trace row_order $o"
  timeout 90 build/bench/moe/bench_moe --out $OUT/trace_o$o --shapes deepseek-v4-pro --tokens 8192 --routing skewed \
    --precision w8a8 --orders interleaved --row-order $o --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
    --trace --trace-csv $OUT/trace_o$o/tiles.csv > $OUT/trace_o$o.log 2>&1
  echo "rc=$?"; grep -E "fused|ceiling" $OUT/trace_o$o/moe.csv | cut -d, -f7,10,11,15
  gzip -f $OUT/trace_o$o/tiles.csv
  python3 scripts/moe-trace-kinds.py $OUT/trace_o$o/tiles.csv.gz
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
