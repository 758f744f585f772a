#!/usr/bin/env bash
# s52 call 1 (nvidia-h200): calls with fewer tokens than the workspace's capacity (MoeRankInputs::tokens; the kernel,
# the weighted sum and the device plan read a count per local rank). The MoE layer GPU tests (with the new
# FewerTokensThanCapacity), the Python MoE tests (test_fewer_tokens_than_capacity), compute-sanitizer memcheck /
# racecheck / synccheck on the new test, and the fused launch of this build against session 51's (31bc996, whose
# bench_moe is build/s51x2.tar.xz's) in processes O N N O (scripts/moe-ab.sh).
# build/s52c1.tar.xz: test_moe_layer_gpu, libxstage_attention.so, bench_moe, bench_moe_old, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu build/ab
tar xJf build/s52c1.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/; mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
mv /tmp/bench_moe /tmp/bench_moe_old build/ab/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c1 && mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt
timeout 300 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|fewer tokens|one rank" $O/test_moe_layer_gpu.log | head -20
timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
grep -E "FAILED|Error" $O/test_python_moe.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 200 $CS --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.FewerTokensThanCapacity' > $O/sanitizer_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/sanitizer_$tool.log | tr '\n' ' ')"
done
BINS="build/ab/bench_moe_old build/ab/bench_moe" OUT=$O timeout 220 bash scripts/moe-ab.sh --shapes qwen3-30b-a3b,deepseek-v4-flash \
  --tokens 8192 --routing skewed --precision w8a8 --orders wave,interleaved --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 2>&1 | tail -9
cd $O && tar czf ../call1.tgz --exclude='*.csv.gz' * && cd .. && rm -rf c1
