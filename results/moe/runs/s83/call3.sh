#!/usr/bin/env bash
# s83 call 3 (any sm_90 GPU): call 2 cut to what 400 s of device time left allows. Carry build/s83g.tar.xz.
#   1. the MoE layer GPU tests of the new dispatch (the only GPU code this session changed) and the memcheck of two of
#      them, as scripts/gpu-tests-device.sh runs it;
#   2. (before the memcheck, in case the call runs out) old against new dispatch, processes A B B A (scripts/moe-ab.sh): the bar's four rows, short blocks.
#   OUT=$OUT bash results/moe/runs/s83/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c3 && mkdir -p "$O"
{
nvidia-smi -L
S=build/s83ab && mkdir -p $S build/tests/moe_gpu && tar xJf build/s83g.tar.xz -C $S ./old ./new ./test_moe_layer_gpu || exit 1
mv $S/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/moe_layer.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/moe_layer.log | tr '\n' ' ')skipped: $(grep -cE '^\[  SKIPPED \] [^ ]+ \(' $O/moe_layer.log)"
grep -E "^\[  FAILED|Failure" $O/moe_layer.log | head
BINS="$S/old/bench_moe $S/new/bench_moe" OUT=$O/v4 timeout 130 bash scripts/moe-ab.sh \
  --shapes deepseek-v4-flash,deepseek-v4-pro --tokens 8192 --routing balanced,skewed --precision w8a8 \
  --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.15 --warmup-s 0.15 --rounds 1
echo "== moe-ab V4 8K rc=$?"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 100 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.EmulatedP2' > $O/memcheck_moe.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_moe.log | tr '\n' ' ')"
rm -f $O/v4/ab/*/blocks.json
tar czf $O/logs.tgz -C $O v4 moe_layer.log memcheck_moe.log && rm -rf $O/v4 $O/moe_layer.log $O/memcheck_moe.log
} 2>&1 | tee $O/out.txt
