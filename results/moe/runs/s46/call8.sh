#!/usr/bin/env bash
# s46 call 8: what the consumers' expansion costs in l1-w4cn-mix (0.435 unrolled): the diagnostic rows
# l1-w4cn-mix-nofence (no fence.proxy.async after the stores) and l1-w4cn-mix-nostore (no stores), beside the other
# W4A8 rows, on 132 CTAs from HBM (twice) and from L2. build/probe46.tar.xz: the stripped mainloop_probe of these sources.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe46.tar.xz -C build/bench/moe
source scripts/moe-env.sh
P=build/bench/moe/mainloop_probe
for run in "H132 --src-mb 16384" "L132 --src-mb 16" "H132b --src-mb 16384"; do
  set -- $run; n=$1; shift
  timeout 150 $P --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "$n rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4c|l1-w4s" $OUT/$n.log
done
cd $OUT && tar czf call8.tgz --exclude=call8.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call8.tgz -exec rm -rf {} +
