#!/usr/bin/env bash
# s52 call x2a (nvidia-h200-x2): the Ulysses layer with two real ranks (s51's call-x2.sh steps 1-3): its C++ GPU tests
# (UlyssesReal.*) and Python tests, the study harness under `xstage launch -n 2`, the torch baseline under torchrun.
# build/s52x2.tar.xz: stripped bench_ulysses, test_ulysses_gpu, libxstage_attention.so, xstage, test_moe_layer_gpu,
# bench_moe of session 52's build. Run: OUT=$OUT bash results/moe/runs/s52/call-x2a.sh with kind nvidia-h200-x2.
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
O=$OUT/x2a && mkdir -p $O
el tests
timeout 120 build/tests/ulysses/test_ulysses_gpu > $O/ulysses-tests.log 2>&1; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $O/ulysses-tests.log | head
timeout 150 python3 tests/attention/run_pytest.py tests/ulysses/test_python_ulysses.py > $O/pytest-ulysses.log 2>&1
echo "pytest rc=$?"; tail -1 $O/pytest-ulysses.log
el harness
build/src/cli/xstage launch -n 2 --timeout 200 -- build/bench/ulysses/bench_ulysses --seq 8K,16K,32K --heads-per-rank 3,6 \
  --out $O/study > $O/harness.log 2>&1
echo "harness rc=$?"; grep -vE "^\s*$" $O/harness.log | tail -12
el torch
timeout 240 torchrun --nproc-per-node 2 bench/ulysses/torch_baseline.py --seq 8K,16K,32K,48K --heads-per-rank 3,6 \
  --block-s 0.3 --rounds 2 --out $O/torch > $O/torch.log 2>&1
echo "torch rc=$?"; grep -E "^ +[0-9]|Error" $O/torch.log
el done
rm -f $O/*/blocks.json
