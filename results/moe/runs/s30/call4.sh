#!/usr/bin/env bash
# s30 call 4: the 32768-token points of the table of record again with long blocks (STEPS="big8 big4" of
# scripts/moe-study.sh: 0.3 s blocks, 0.3 s warm-up, two rounds, at least 5 calls per block) on call 3's kernel (the
# final one): call 3's short-block table had two points whose fused-vs-unfused ratio flipped between the ABBA halves
# (DeepSeek-V3 32K, W4A8 balanced 1.055, W8A8 skewed 1.064). Merged on the host (moe-summary.py).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
for st in big8 big4; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 280 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"; grep -E "^configs" $OUT/study.log | tail -1
done
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
