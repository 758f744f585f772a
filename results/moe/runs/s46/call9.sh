#!/usr/bin/env bash
# s46 call 9: the W4A8 tile with the operands' roles swapped (l1-w4rs-mix: the int4 weights expanded in registers as
# wgmma's A operand, the tokens the B operand from shared memory; no shared-memory stores), beside the other W4A8 rows,
# on 132 CTAs from HBM (twice) and from L2, 33 CTAs from HBM; memcheck, synccheck, racecheck on a short run.
# build/probe46.tar.xz: the stripped mainloop_probe of these sources.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe46.tar.xz -C build/bench/moe
source scripts/moe-env.sh
P=build/bench/moe/mainloop_probe
for tool in memcheck synccheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --print-limit 5 $P --pipe-only --src-mb 64 --ctas 4 --kblocks 96 --reps 1 > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log
done
for run in "H132 --src-mb 16384" "L132 --src-mb 16" "H33 --src-mb 16384 --ctas 33" "H132b --src-mb 16384"; do
  set -- $run; n=$1; shift
  timeout 150 $P --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "$n rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4-mix-nocvt|l1-w4cn-mix |l1-w4rs" $OUT/$n.log
done
cd $OUT && tar czf call9.tgz --exclude=call9.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call9.tgz -exec rm -rf {} +
