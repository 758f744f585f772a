#!/usr/bin/env bash
# s46 call 7: what bounds the consumers' per-use expansion (l1-w4cs-mix, 0.424): the new probe rows l1-w4cn-mix (split
# over N: each warpgroup expands and syncs only its own half of the weights, never meeting the other) and
# l1-w4cn-mix-nocvt (the same without the expansion), l1-w4cn-mix with its four chunks loaded together (unrolled; call 6 ran it rolled) and l1-w4ci-mix (expanded in place: 4 stages of 48 KB), beside the rows of call 2, on 132 CTAs from HBM and from L2;
# memcheck, synccheck and racecheck on a short run. build/probe46.tar.xz: the stripped mainloop_probe of these sources.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe46.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
P=build/bench/moe/mainloop_probe
for tool in memcheck synccheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --print-limit 5 $P --pipe-only --src-mb 64 --ctas 4 --kblocks 96 --reps 1 > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log
done
for run in "H132 --src-mb 16384" "L132 --src-mb 16" "H132b --src-mb 16384"; do
  set -- $run; n=$1; shift
  el "$n $*"
  timeout 150 $P --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4" $OUT/$n.log
done
el done
cd $OUT && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
