#!/usr/bin/env bash
# s50 call 12 (nvidia-h200): every MoE GPU test binary and the Python GPU tests on the session's final build (HEAD of
# the closing note): test_moe_layer_gpu, test_unfused_gpu, test_unfused_ep_gpu, test_fp8_wgmma_gpu; xstage.moe, team,
# Ulysses. build/s50c12.tar.xz: those four binaries and libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu && tar xJf build/s50c12.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/
for t in test_moe_layer_gpu test_unfused_gpu test_unfused_ep_gpu test_fp8_wgmma_gpu; do mv /tmp/$t build/tests/moe_gpu/; done
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c12 && mkdir -p $O
for t in test_moe_layer_gpu test_unfused_gpu test_unfused_ep_gpu test_fp8_wgmma_gpu; do
  timeout 200 build/tests/moe_gpu/$t > $O/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/$t.log | tr '\n' ' ')"
done
for t in tests/moe_gpu/test_python_moe.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py; do
  timeout 200 python3 tests/attention/run_pytest.py $t > $O/$(basename $t .py).log 2>&1; echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
cd $O && tar czf ../call12.tgz * && cd .. && rm -rf c12
