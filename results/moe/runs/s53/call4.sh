#!/usr/bin/env bash
# s53 call 4 (nvidia-h200): held-out check of auto's new tie rule (a simulated tie interleaves where an expert holds
# at most 2 rows): token counts and a seed never timed before (256 and 1024 tokens per rank, seed 2), both routings,
# W8A8 and W4A8, every shape, both orders timed in one process. build/s53c4.tar.xz: bench_moe (the new rule), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s53c4.tar.xz -C build/bench/moe
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O/runs
for p in w8a8 w4a8; do
  timeout 280 build/bench/moe/bench_moe --out $O/runs/$p --shapes all --tokens 256,1024 --routing balanced,skewed \
    --precision $p --orders wave,interleaved --worlds 1 --check-tokens 1 --seed 2 --block-s 0.05 --warmup-s 0.03 \
    > $O/runs/$p.log 2>&1
  echo "$p rc=$?"; tail -3 $O/runs/$p.log
done
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
