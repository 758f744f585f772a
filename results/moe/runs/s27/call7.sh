#!/usr/bin/env bash
# s27 call 7: W8A8 with 3 pipeline stages and two 32 KB staging slots (build-s3: -DXSTAGE_MOE_STAGES=3
# -DXSTAGE_MOE_EPI_SLOTS=2) against main's 4 stages and one slot (build), in ABBA processes (scripts/moe-ab.sh):
# with one slot the MMA warpgroups wait ~3.6 us per 256-column Linear-2 tile for its second hand-off (s26 trace).
# V4-Pro, V4-Flash, DeepSeek-V3 at 8K, both routings, both orders, traced (slot waits, mainloop rates).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
BINS="build/bench/moe/bench_moe build-s3/bench/moe/bench_moe" OUT=$OUT timeout 520 bash scripts/moe-ab.sh \
  --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 --tokens 8192 --precision w8a8 --orders wave,interleaved \
  --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 --trace 2>&1 | tail -40
cd $OUT && rm -f ab/*/blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
