#!/usr/bin/env bash
# s62 call 5 (nvidia-h200 asked): the final build (the stream kernels' shared chunk lookup): the stream's GPU tests and
# memcheck on any card; on an H200 also the P = 1 table (scripts/moe-study.sh STEPS="w8 w4 merge") with all five
# stream forms. Carry build/s62.tar.xz (bench_moe, test_unfused_gpu; stripped).
#   OUT=$OUT bash results/moe/runs/s62/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/bench/moe build/tests/moe_gpu && tar xJf build/s62.tar.xz -C build/pk
cp build/pk/bench_moe build/bench/moe/ && cp build/pk/test_unfused_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 120 build/tests/moe_gpu/test_unfused_gpu > $O/test_unfused_gpu.log 2>&1
el "test_unfused_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_unfused_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_unfused_gpu.log | head
grep -E "^byte stream" $O/test_unfused_gpu.log
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_unfused_gpu \
  --gtest_filter='*ByteStreamReads*' > $O/memcheck_bytestream.log 2>&1
el "memcheck ByteStream rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_bytestream.log)"
if grep -q H200 $O/gpu.txt; then
  for st in w8 w4 merge; do
    left=$(( ${TABLE_END:-575} - ($(date +%s) - T0) ))
    [ $left -gt 20 ] || { el "$st skipped"; continue; }
    OUT=$O/study STEPS=$st timeout $left bash scripts/moe-study.sh >> $O/study.log 2>&1
    el "$st rc=$?"
  done
  grep -E "deepseek-v4" $O/study.log | grep 8192 | head -8
  python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s.get(k) for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','bound_fraction_v4_w8a8_8k','bound_fraction_v4_w8a8_32k','memory_bound_configs','configs_fused_slower')})"
else
  echo "not an H200: the table is not run"
fi
cd $O && rm -f study/*/blocks.json && tar czf ../c5.tgz . && cd .. && rm -rf $O
