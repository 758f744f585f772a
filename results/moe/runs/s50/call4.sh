#!/usr/bin/env bash
# s50 call 4 (nvidia-h200): where a Python call's host time goes (host_probe.py), the unfused baselines' tests (their
# DispatchPlan's constructor now takes the index by value), xstage.moe's tests under compute-sanitizer memcheck on the
# final library. build/s50c4.tar.xz: libxstage_attention.so, test_unfused_gpu, test_unfused_ep_gpu (stripped).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu && tar xJf build/s50c4.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/test_unfused_gpu /tmp/test_unfused_ep_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c4 && mkdir -p $O
timeout 120 python3 results/moe/runs/s50/host_probe.py > $O/host_probe.log 2>&1; echo "host_probe rc=$?"; cat $O/host_probe.log | tail -3
for t in test_unfused_gpu test_unfused_ep_gpu; do
  timeout 150 build/tests/moe_gpu/$t > $O/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/$t.log | tr '\n' ' ')"
done
timeout 300 compute-sanitizer --tool memcheck --target-processes all python3 tests/attention/run_pytest.py \
  tests/moe_gpu/test_python_moe.py -k "emulated or single_rank or float8 or bad_input" > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | sort | uniq -c | tr '\n' ' ') $(tail -1 $O/memcheck.log)"
cd $O && tar czf ../call4.tgz * && cd .. && rm -rf c4
