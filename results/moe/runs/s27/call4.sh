#!/usr/bin/env bash
# s27 call 4 (the kernel of call 3: merge_loads 1 by default, a_trim 0): the table of record, STEPS="w8 w4 merge" of
# scripts/moe-study.sh (the 84-point grid, both orders, emulated P = 2, 4, 8 bit-identity); then compute-sanitizer
# memcheck on PairShareEqualSingleCtas (weight-sharing pairs multicasting whole boxes, the merged 3-d loads, W4A8's
# merged scale loads, and the a_trim / merge_loads 0 variants).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
for st in w8 w4 merge; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 260 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
el memcheck
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
left=$(( 560 - ($(date +%s) - T0) ))
timeout $left $SAN --tool memcheck --error-exitcode 3 --print-limit 12 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter=MoeLayerGpu.PairShareEqualSingleCtas > $OUT/san_memcheck.log 2>&1
echo "memcheck exit $?"; grep -m2 -A3 "Error:" $OUT/san_memcheck.log; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_memcheck.log | head -3
el done
cd $OUT && rm -f study/*/blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
