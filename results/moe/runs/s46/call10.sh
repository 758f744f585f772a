#!/usr/bin/env bash
# s46 call 10: the int4 register-fragment layout end to end (test_fp8_wgmma_gpu's new Int4FragmentsThroughRsWgmma:
# pack_int4_frag's block through wgmma's RS form against the exact sums) and the wgmma tests under memcheck; the probe
# after the review mend (the consumer-expanding W4A8 rows' shared set-up, producer and N-split consumers): synccheck on
# a short run, the pipe rows on 132 CTAs from HBM. build/c10_46.tar.xz: stripped mainloop_probe, test_fp8_wgmma_gpu.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/c10_46.tar.xz -C /tmp
mv /tmp/mainloop_probe build/bench/moe/ && mv /tmp/test_fp8_wgmma_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
build/tests/moe_gpu/test_fp8_wgmma_gpu > $OUT/wgmma.log 2>&1; echo "wgmma tests rc=$?"
grep -E "OK|FAIL|Failure|expected|exact|trial|fragments" $OUT/wgmma.log | head -20
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/moe_gpu/test_fp8_wgmma_gpu > $OUT/wgmma_memcheck.log 2>&1
echo "memcheck rc=$?"; grep "ERROR SUMMARY" $OUT/wgmma_memcheck.log
P=build/bench/moe/mainloop_probe
timeout 90 compute-sanitizer --tool synccheck --print-limit 5 $P --pipe-only --src-mb 64 --ctas 4 --kblocks 96 --reps 1 > $OUT/san_synccheck.log 2>&1
echo "synccheck rc=$?"; grep -E "ERROR SUMMARY" $OUT/san_synccheck.log
timeout 120 $P --pipe-only --src-mb 16384 --json $OUT/H132.json > $OUT/H132.log 2>&1
echo "H132 rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4" $OUT/H132.log
cd $OUT && tar czf call10.tgz --exclude=call10.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call10.tgz -exec rm -rf {} +
