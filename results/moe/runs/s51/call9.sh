#!/usr/bin/env bash
# s51 call 9 (nvidia-h200): the final build, after the signal epochs moved into device memory (a call prologue kernel;
# the fused kernel's dispatch waits, the combine wait and the plan's wait read them) so that a device-planned call is
# captured in a CUDA graph and replayed. Every GPU test binary the change touches (MoE layer with CapturedCallsReplay,
# unfused, EP-unfused, FP8 wgmma, runtime, Ulysses, peer store) and the Python GPU tests (MoE with the torch.cuda.graph
# test, team, Ulysses); compute-sanitizer memcheck / racecheck / synccheck on the new cases; the fused launch of this
# build against session 50's (558011d) in processes O N N O as call 5; plan_bench on three layers.
# build/s51c9.tar.xz: those binaries, libxstage_attention.so, plan_bench, bench_moe and bench_moe_old, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu build/tests/runtime build/tests/ulysses build/tests/kernel build/bench/moe build/ab
tar xJf build/s51c9.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/; mv /tmp/plan_bench build/bench/moe/
mv /tmp/bench_moe /tmp/bench_moe_old build/ab/
for t in test_moe_layer_gpu test_unfused_gpu test_unfused_ep_gpu test_fp8_wgmma_gpu; do mv /tmp/$t build/tests/moe_gpu/; done
mv /tmp/test_runtime_gpu build/tests/runtime/; mv /tmp/test_ulysses_gpu build/tests/ulysses/; mv /tmp/test_peer_store_gpu build/tests/kernel/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c9 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt
for t in moe_gpu/test_moe_layer_gpu moe_gpu/test_unfused_gpu moe_gpu/test_unfused_ep_gpu moe_gpu/test_fp8_wgmma_gpu runtime/test_runtime_gpu ulysses/test_ulysses_gpu kernel/test_peer_store_gpu; do
  n=$(basename $t); timeout 240 build/tests/$t > $O/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/$n.log | tr '\n' ' ')"
done
grep -E "^\[  FAILED|Failure" $O/*.log | head -20
for t in tests/moe_gpu/test_python_moe.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py; do
  timeout 200 python3 tests/attention/run_pytest.py $t > $O/$(basename $t .py).log 2>&1; echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
grep -E "FAILED|Error" $O/test_python_moe.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 150 $CS --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.CapturedCallsReplay:MoeLayerGpu.DevicePlanRejectsBadRouting:MoeLayerGpu.EmulatedP2' \
    > $O/sanitizer_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/sanitizer_$tool.log | tr '\n' ' ')"
done
BINS="build/ab/bench_moe_old build/ab/bench_moe" OUT=$O timeout 200 bash scripts/moe-ab.sh --shapes qwen3-30b-a3b,deepseek-v4-flash \
  --tokens 8192 --routing skewed --precision w8a8 --orders wave,interleaved --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 2>&1 | tail -9
timeout 100 build/bench/moe/plan_bench --shapes qwen3-30b-a3b,deepseek-v4-pro,dit-moe-xl --worlds 1 --json $O/plan_bench.json > $O/plan_bench.log 2>&1
echo "plan_bench rc=$?"; cat $O/plan_bench.log
cd $O && tar czf ../call9.tgz --exclude='*.csv.gz' * && cd .. && rm -rf c9
