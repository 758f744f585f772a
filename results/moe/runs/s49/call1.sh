#!/usr/bin/env bash
# s49 call 1 (nvidia-h200): after ce43937 (Communicator::enqueued) and the torch baseline's emulated check.
#   1. the Python Ulysses GPU tests (the new test runs torch_baseline.py --emulate end to end);
#   2. torch_baseline.py --emulate 2 / 4 at the shapes whose check failed on two H200s in s48 (16K and up): which
#      side is off, by the float64 reference on 8 rows per rank;
#   3. torch_baseline.py under torchrun with one rank (the real-team path and its arbiter; P = 1, nothing moves);
#   4. the GPU tests of the code ce43937 touched (test_ulysses_gpu, test_unfused_ep_gpu, test_unfused_gpu) and the
#      MoE layer tests; 5. bench_ulysses on one real rank (its nccl_a2a column after wait_nccl's spin).
# build/s49c1.tar.xz: the stripped binaries and libxstage_attention.so of 71bdaad.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/ulysses build/tests/ulysses build/tests/moe_gpu build/src/kernels/attention build/src/cli
tar xJf build/s49c1.tar.xz -C /tmp
mv /tmp/bench_ulysses build/bench/ulysses/ && mv /tmp/test_ulysses_gpu build/tests/ulysses/
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/xstage build/src/cli/
mv /tmp/test_unfused_ep_gpu /tmp/test_unfused_gpu /tmp/test_moe_layer_gpu /tmp/test_fp8_wgmma_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
el pytest
timeout 120 python3 tests/attention/run_pytest.py tests/ulysses/test_python_ulysses.py > $OUT/pytest-ulysses.log 2>&1
echo "pytest rc=$?"; tail -3 $OUT/pytest-ulysses.log
el emulated
timeout 150 python3 bench/ulysses/torch_baseline.py --emulate 2 --seq 8K,16K,32K,64K --heads-per-rank 3,6 \
  --out $OUT/torch-emu2 > $OUT/torch-emu2.log 2>&1; echo "emu2 rc=$?"; cat $OUT/torch-emu2.log | tail -10
timeout 100 python3 bench/ulysses/torch_baseline.py --emulate 4 --seq 16K,32K --heads-per-rank 3 \
  --out $OUT/torch-emu4 > $OUT/torch-emu4.log 2>&1; echo "emu4 rc=$?"; tail -3 $OUT/torch-emu4.log
el torchrun-1
timeout 120 torchrun --nproc-per-node 1 bench/ulysses/torch_baseline.py --seq 8K,16K --heads-per-rank 3,6 --block-s 0.1 \
  --rounds 1 --out $OUT/torch-real1 > $OUT/torch-real1.log 2>&1; echo "real1 rc=$?"; tail -5 $OUT/torch-real1.log
el gtests
for b in build/tests/ulysses/test_ulysses_gpu build/tests/moe_gpu/test_unfused_ep_gpu build/tests/moe_gpu/test_unfused_gpu; do
  timeout 150 $b > $OUT/$(basename $b).log 2>&1; echo "$(basename $b) rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/$(basename $b).log
done
MOE_SANITIZE=0 MOE_TEST_BINS="build/tests/moe_gpu/test_moe_layer_gpu build/tests/moe_gpu/test_fp8_wgmma_gpu" OUT=$OUT/moe-tests \
  timeout 200 bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED" | head
el bench_ulysses-1
timeout 60 build/src/cli/xstage launch -n 1 --timeout 50 -- build/bench/ulysses/bench_ulysses --seq 8K,32K --heads-per-rank 3 \
  --block-s 0.1 --out $OUT/ulysses-real1 > $OUT/ulysses-real1.log 2>&1; echo "ulysses-real1 rc=$?"; tail -12 $OUT/ulysses-real1.log
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
