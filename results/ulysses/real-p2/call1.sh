#!/usr/bin/env bash
# s48 (nvidia-h200-x2): the Ulysses layer with REAL ranks, P = 2 (issue 13's runs; that issue ended blocked when no
# two-GPU machine was lent). build/s48u.tar.xz: stripped bench_ulysses, test_ulysses_gpu, libxstage_attention.so.
#   1. the Ulysses GPU tests (UlyssesReal.* run with two GPUs: fused == serial == one GPU bit for bit; a missing peer
#      times out naming it);
#   2. the study harness under `xstage launch -n 2` (M 8K-64K, 3/6/12 heads per rank, D 128, bf16; ncclAlltoAll variants);
#   3. the torch baseline (cuDNN SDPA + all_to_all_single, xDiT/yunchang style) against the xstage layer under torchrun.
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/bench/ulysses build/tests/ulysses build/src/kernels/attention build/src/cli
tar xJf build/s48u.tar.xz -C /tmp
mv /tmp/bench_ulysses build/bench/ulysses/ && mv /tmp/test_ulysses_gpu build/tests/ulysses/
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/xstage build/src/cli/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nccl_py=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$nccl_py" ] && export LD_LIBRARY_PATH="$nccl_py:${LD_LIBRARY_PATH:-}"
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L
el tests
timeout 120 build/tests/ulysses/test_ulysses_gpu > $OUT/ulysses-tests.log 2>&1; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|xstage-result\] test=ulysses mode=real" $OUT/ulysses-tests.log | head -20
ARGS="--seq 8K,16K,32K,48K,64K --heads-per-rank 3,6,12"
el harness
build/src/cli/xstage launch -n 2 --timeout ${H_TIMEOUT:-280} -- build/bench/ulysses/bench_ulysses $ARGS --out $OUT/study \
  > $OUT/harness.log 2>&1
echo "harness rc=$?"; grep -vE "^\s*$" $OUT/harness.log | tail -22
el torch
XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python \
  timeout ${T_TIMEOUT:-220} torchrun --nproc-per-node 2 bench/ulysses/torch_baseline.py $ARGS --out $OUT/torch > $OUT/torch.log 2>&1
echo "torch rc=$?"; tail -20 $OUT/torch.log
el done
cd $OUT && rm -f */blocks.json && tar czf ulysses.tgz --exclude=ulysses.tgz * && find . -mindepth 1 -maxdepth 1 ! -name ulysses.tgz -exec rm -rf {} +
