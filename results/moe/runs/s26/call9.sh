#!/usr/bin/env bash
# s26 call 9: the W4A8 32768-token points with long blocks (STEPS=big4 of scripts/moe-study.sh: 0.3 s blocks, real
# warm-up, two rounds), where the short blocks of call 6 flip (DeepSeek-V3 balanced, 1.013).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
OUT=$OUT/study STEPS=big4 timeout 280 bash scripts/moe-study.sh > $OUT/big.log 2>&1
echo "big4 rc=$?"
grep -E "^configs|^orders" $OUT/big.log
python3 scripts/moe-summary.py --runs $OUT/study/big4 --out-moe $OUT/study/moe-big --out-schedule $OUT/study/moe-schedule-big >> $OUT/big.log 2>&1
cd $OUT && rm -f study/*/blocks.json && tar czf call9.tgz --exclude=call9.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call9.tgz -exec rm -rf {} +
