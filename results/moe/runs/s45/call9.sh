#!/usr/bin/env bash
# s45 call 9: the probe after the review mend (w4_kernel expands through expand_box, the W4A8 rows share their host set-up):
# memcheck, synccheck, racecheck on a short run, then every
# pipe row on 132 CTAs from HBM and from L2. build/probe45.tar.xz: the stripped mainloop_probe of these sources.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe45.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
P=build/bench/moe/mainloop_probe
for tool in memcheck synccheck racecheck; do
  el "sanitizer $tool"
  timeout 120 compute-sanitizer --tool $tool --print-limit 5 $P --pipe-only --src-mb 64 --ctas 4 --kblocks 96 --reps 1 > $OUT/san_$tool.log 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log
done
for run in "H132 --src-mb 16384" "L132 --src-mb 16"; do
  set -- $run; n=$1; shift
  el "$n $*"
  timeout 150 $P --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4" $OUT/$n.log
done
el done
cd $OUT && tar czf call9.tgz --exclude=call9.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call9.tgz -exec rm -rf {} +
