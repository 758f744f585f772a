#!/usr/bin/env bash
# One device call for the Ulysses layer (issue 10) from a build carried to the GPU host:
#   1. its GPU tests (gtest: emulated P = 2, 4, 8 and real P = 2 where two GPUs are; the Python op)
#   2. the study harness: emulated ranks on one GPU (default), or real ranks when ULYSSES_REAL=1
#      (`xstage launch -n $NPROC` starts one process per GPU; adds the ncclAlltoAll variants)
#   3. with ULYSSES_REAL=1: the torch baseline against the xstage layer under torchrun (bench/ulysses/torch_baseline.py)
# Writes $OUT/ulysses-tests.log, $OUT/harness.log and $OUT/study/{summary.json,ulysses.csv,blocks.json}; with
# ULYSSES_REAL=1 also $OUT/torch/ and $OUT/torch.log.
#   ULYSSES_ARGS="--seq 8K,16K,32K,48K,64K --heads-per-rank 3,6,12" to change the grid (TORCH_ARGS the torch
#   baseline's); RANKS: emulated ranks (2); NPROC: real ranks (2); ULYSSES_TESTS=0 skips the tests.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-results/ulysses/dev}
BUILD=${XSTAGE_BUILD_DIR:-build}
mkdir -p "$OUT"
nccl_py=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$nccl_py" ] && export LD_LIBRARY_PATH="$nccl_py:${LD_LIBRARY_PATH:-}"
nvidia-smi -L
if [ "${ULYSSES_TESTS:-1}" = 1 ]; then
  echo "== tests"
  "$BUILD/tests/ulysses/test_ulysses_gpu" > "$OUT/ulysses-tests.log" 2>&1; echo "gtest exit $?"
  XSTAGE_ATTENTION_LIB="$BUILD/src/kernels/attention/libxstage_attention.so" PYTHONPATH=python \
    python3 tests/attention/run_pytest.py tests/ulysses/test_python_ulysses.py >> "$OUT/ulysses-tests.log" 2>&1
  echo "python exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |passed|failed|\[xstage-result\]" "$OUT/ulysses-tests.log" | tail -20
fi
echo "== study"
ARGS=${ULYSSES_ARGS:---seq 8K,16K,32K,48K,64K --heads-per-rank 3,6,12}
ARGS_TORCH=${TORCH_ARGS:---seq 8K,16K,32K,48K,64K --heads-per-rank 3,6,12}
if [ "${ULYSSES_REAL:-0}" = 1 ]; then
  timeout 540 "$BUILD/src/cli/xstage" launch -n "${NPROC:-2}" -- "$BUILD/bench/ulysses/bench_ulysses" $ARGS \
    --out "$OUT/study" 2>&1 | tee "$OUT/harness.log"
else
  timeout 540 "$BUILD/bench/ulysses/bench_ulysses" --ranks "${RANKS:-2}" $ARGS --out "$OUT/study" 2>&1 | tee "$OUT/harness.log"
fi
echo "harness exit ${PIPESTATUS[0]}"
if [ "${ULYSSES_REAL:-0}" = 1 ]; then
  echo "== torch baseline (cuDNN SDPA + all_to_all_single, xDiT/yunchang style) vs the xstage layer, same processes"
  XSTAGE_ATTENTION_LIB=$(realpath "$BUILD/src/kernels/attention/libxstage_attention.so") PYTHONPATH=python \
    timeout 400 torchrun --nproc-per-node "${NPROC:-2}" bench/ulysses/torch_baseline.py $ARGS_TORCH \
    --out "$OUT/torch" 2>&1 | tee "$OUT/torch.log"
  echo "torch baseline exit ${PIPESTATUS[0]}"
fi
