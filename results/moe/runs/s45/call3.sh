#!/usr/bin/env bash
# s45 call 3: the int4 stage expanded by the consumer warps themselves (l1-w4c-mix: 256 threads, block kb + 1 expanded while block kb's gate batch runs; l1-w4ce-mix: also the three epilogue warps, 352) beside call 1's rows. Could W4A8 stream its weights as int4 and expand them in shared memory, instead of the kernel's e4m3
# copy in global memory? The mainloop probe's new rows l1-w4 / l1-w4-mix (3 stages, three converter warps; -nocvt: the
# same without the expansion) beside l1-tma / l1-tma-mix (W8A8, 4 stages): 132 CTAs from HBM (16 GB source) and from
# L2 (16 MB), 33 CTAs from HBM. Then memcheck / synccheck / racecheck on a short run, and the w4 kernels' SASS.
# build/probe45.tar.xz: the stripped mainloop_probe of this session's sources.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe45.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
P=build/bench/moe/mainloop_probe
for run in "H132 --src-mb 16384" "L132 --src-mb 16" "H33 --src-mb 16384 --ctas 33 --kblocks 2048" ; do
  set -- $run; n=$1; shift
  el "$n $*"
  timeout 150 $P --pipe-only "$@" --json $OUT/$n.json > $OUT/$n.log 2>&1
  echo "rc=$?"; grep -E "^variant|l1-tma|l1-w4" $OUT/$n.log
done
for tool in memcheck synccheck racecheck; do
  el "sanitizer $tool"
  timeout 120 compute-sanitizer --tool $tool --print-limit 5 $P --pipe-only --src-mb 64 --ctas 4 --kblocks 96 --reps 1 > $OUT/san_$tool.log 2>&1
  echo "rc=$?"; tail -3 $OUT/san_$tool.log
done
cuobjdump -sass $P > $OUT/probe.sass 2>&1; awk '/Function : .*w4_kernel/{p=1} p&&/Function : / && !/w4_kernel/{p=0} p' $OUT/probe.sass > $OUT/w4.sass; rm -f $OUT/probe.sass
wc -l $OUT/w4.sass
el done
cd $OUT && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
