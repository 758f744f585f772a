#!/usr/bin/env bash
# s25 call 5: diagnosis of the one bar issue 11 still misses, the DeepSeek-V4-Pro W8A8 ceiling fraction at 8192 tokens
# (0.469 in call 4): the per-tile trace (mainloop rates, data waits, half tiles) and ncu's DRAM bytes and L2 hit rate
# of one fused launch per order, against the 25.4 GB of FP8 weights that must be read at least once.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
OUT=$OUT/diag STEPS="trace ncu" DIAG_SHAPES="--shapes deepseek-v4-pro" DIAG_NCU_SHAPES="--shapes deepseek-v4-pro" \
  DIAG_ARGS="--tokens 8192 --routing skewed --worlds 1" bash scripts/moe-diag.sh 2>&1 | tee $OUT/diag.log
(cd $OUT && rm -f diag/*/blocks.json && tar czf call5.tgz diag diag.log)
