#!/usr/bin/env bash
# s44 call 8: can a second producer thread issue a stage's TMA loads beside the first? The mainloop probe's l1-tma
# and l1-tma-mix rows against their -2p forms (warp 1 issues the weight boxes, warp 0 A's boxes and row scales), each
# producer thread's issue cycles per stage printed: 66 and 132 CTAs from a 16 MB source (L2), 132 CTAs from 16 GB
# (HBM), 33 CTAs from 16 GB. build/probe44.tar.xz: the stripped mainloop_probe of this session's sources.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe44.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
P=build/bench/moe/mainloop_probe
for run in "L66 --src-mb 16 --ctas 66" "L132 --src-mb 16" "H132 --src-mb 16384" "H33 --src-mb 16384 --ctas 33 --kblocks 2048" "L66b --src-mb 16 --ctas 66"; do
  set -- $run; n=$1; shift
  el "$n $*"
  timeout 120 $P --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "rc=$?"; grep -E "^variant|l1-tma" $OUT/$n.log
done
el done
cd $OUT && tar czf call8.tgz --exclude=call8.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call8.tgz -exec rm -rf {} +
