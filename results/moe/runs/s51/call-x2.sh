#!/usr/bin/env bash
# s51 (nvidia-h200-x2, if lent): s49's two-GPU steps (the Ulysses layer with real ranks after the stream fix 25adc7b), the
# MoE layer's real-rank GPU tests (MoeLayerReal.*: two ranks against a one-GPU twin, the host and the device plan) and
# the MoE layer from Python with two real ranks (test_python_moe.py -k two_ranks: moe_two_ranks.py under torchrun, both
# plans), and the harness with --plan device on two real ranks (each rank against its slice of a host-planned P = 1 run).
#   1. the Ulysses C++ GPU tests (UlyssesReal.* with two GPUs) and the Python ones;
#   2. the study harness under `xstage launch -n 2` (its nccl_a2a column after wait_nccl's spin, b5cfcfb);
#   3. the torch baseline under torchrun (cuDNN SDPA + all_to_all_single against the xstage Python op, same processes;
#      the float64 arbiter, spreads, ABBA flips).
# build/s51x2.tar.xz: stripped bench_ulysses, test_ulysses_gpu, libxstage_attention.so, xstage, test_moe_layer_gpu,
# bench_moe of the current build (remake it: strip those six from build/ into a folder, tar cJf build/s51x2.tar.xz -C
# that folder .),
# carried. Run: OUT=$OUT bash results/moe/runs/s51/call-x2.sh with kind nvidia-h200-x2.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/ulysses build/tests/ulysses build/src/kernels/attention build/src/cli build/tests/moe_gpu
tar xJf build/s51x2.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/ && mkdir -p build/bench/moe && mv /tmp/bench_moe build/bench/moe/
mv /tmp/bench_ulysses build/bench/ulysses/ && mv /tmp/test_ulysses_gpu build/tests/ulysses/
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/xstage build/src/cli/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
O=$OUT/x2 && mkdir -p $O
nvidia-smi -L
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
cd $O && rm -f */blocks.json && tar czf ../x2.tgz * && cd .. && rm -rf x2
