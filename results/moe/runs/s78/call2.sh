#!/usr/bin/env bash
# s78 call 2 (any sm_90 card): every GPU test binary and the Python GPU tests of main 1e5f1a0 (GPU code as of dbf55de) on one GPU (the
# real-rank tests skip below two GPUs); memcheck on
# two MoE layer tests. build/s78a.tar.xz: the eight GPU test binaries, libxstage_attention.so and xstage,
# stripped (the real-rank tests start their own children from the binary's path).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
tar xJf build/s78a.tar.xz -C /tmp
for t in runtime/test_runtime_gpu kernel/test_peer_store_gpu ulysses/test_ulysses_gpu attention/test_attention_gpu \
         moe_gpu/test_fp8_wgmma_gpu moe_gpu/test_unfused_gpu moe_gpu/test_unfused_ep_gpu moe_gpu/test_moe_layer_gpu; do
  mkdir -p build/tests/$(dirname $t) && mv /tmp/$(basename $t) build/tests/$t
done
mkdir -p build/src/kernels/attention build/src/cli
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/xstage build/src/cli/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c2 && mkdir -p $O
nvidia-smi -L > $O/gpus.txt; cat $O/gpus.txt
for t in runtime/test_runtime_gpu kernel/test_peer_store_gpu ulysses/test_ulysses_gpu attention/test_attention_gpu \
         moe_gpu/test_fp8_wgmma_gpu moe_gpu/test_unfused_gpu moe_gpu/test_unfused_ep_gpu moe_gpu/test_moe_layer_gpu; do
  n=$(basename $t); timeout 300 build/tests/$t > $O/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED) |tests? ran' $O/$n.log | tr '\n' ' ') skipped: $(grep -cE '^\[  SKIPPED \]' $O/$n.log)"
done
grep -E "^\[  FAILED|Failure" $O/*.log | head -20
for t in tests/attention/test_python_module.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py \
         tests/moe_gpu/test_python_moe.py; do
  timeout 240 python3 tests/attention/run_pytest.py $t > $O/$(basename $t .py).log 2>&1; echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 200 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.EmulatedP2' > $O/memcheck_moe.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_moe.log | tr '\n' ' ')"
# The device returns at most 8 files: keep the logs in one archive (s78's run, before this line, returned 8 of 14 logs).
(cd $O && tar czf ../c2-logs.tgz *.log *.txt && rm -f *.log) && mv $OUT/c2-logs.tgz $O/logs.tgz
