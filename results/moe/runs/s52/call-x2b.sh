#!/usr/bin/env bash
# s52 call x2b (nvidia-h200-x2): the MoE layer with two real ranks: MoeLayerReal.* (two ranks against a one-GPU twin,
# host and device plan), bench_moe --plan device under `xstage launch -n 2` (each rank against its slice of a
# host-planned P = 1 run), and the Python op under torchrun (moe_two_ranks.py: both plans, W4A8, and a call with a
# different token count per rank). Same tarball as call-x2a.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/ulysses build/tests/ulysses build/src/kernels/attention build/src/cli build/tests/moe_gpu build/bench/moe
tar xJf build/s52x2.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/ && mv /tmp/bench_moe build/bench/moe/
mv /tmp/bench_ulysses build/bench/ulysses/ && mv /tmp/test_ulysses_gpu build/tests/ulysses/
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/xstage build/src/cli/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L
O=$OUT/x2b && mkdir -p $O
el moe-real
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu --gtest_filter='MoeLayerReal*' > $O/moe-real.log 2>&1
echo "moe real rc=$?"; grep -E "rank [01] of 2|^\[  (PASSED|FAILED|SKIPPED) " $O/moe-real.log | head -30
el moe-harness-device-plan
build/src/cli/xstage launch -n 2 --timeout 200 -- build/bench/moe/bench_moe --out $O/moe-devplan --plan device --no-time \
  --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 2048 --precision w8a8,w4a8 --orders wave,interleaved \
  > $O/moe-devplan.log 2>&1
echo "bench_moe --plan device, 2 ranks rc=$?"; grep -E "real ranks|DIFFER|rc=|Error|error" $O/moe-devplan.log | head -12
el moe-python
timeout 300 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -k two_ranks -s > $O/moe-python-2.log 2>&1
echo "moe python two ranks rc=$?"; grep -E "rank [01]|PASS|passed|failed" $O/moe-python-2.log | head
el done
rm -f $O/*/blocks.json
