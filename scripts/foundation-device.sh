#!/usr/bin/env bash
# One device call for the kernel foundation (issue 8), from a build carried to the GPU host:
#   1. the GPU test suite (ctest -L gpu; emulated ranks P = 2, 4, 8 on one GPU, real P = 2 where two GPUs are)
#   2. compute-sanitizer memcheck and racecheck on the peer-store tests (emulated ranks)
#   3. optionally (FOUNDATION_BENCH=1) the attention benchmark with the build before the change as a second
#      backend in the same process (bench/attention/bench_attention.py --lib-before)
# Writes $OUT/gpu-tests.log, $OUT/sanitize.log, $OUT/attention/{attention.csv,summary.json}, $OUT/machine.txt.
# Then, on the CPU machine: python3 scripts/foundation-summary.py --tests <that folder>/gpu-tests.log
#   [--attention <that folder>/attention] -o results/foundation (results/foundation/README.md has the call).
# XSTAGE_BUILD_DIR: the carried build (build); BENCH_ARGS: more bench_attention.py arguments; the build before the
# change is read from .carry/before/libxstage_attention.so.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-results/foundation/dev}
mkdir -p "$OUT"
BUILD=${XSTAGE_BUILD_DIR:-build}
nccl_py=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$nccl_py" ] && export LD_LIBRARY_PATH="$nccl_py:${LD_LIBRARY_PATH:-}"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)" 2>/dev/null; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== GPU tests"
XSTAGE_PREBUILT=1 XSTAGE_BUILD_DIR="$BUILD" timeout 400 bash scripts/test.sh gpu > "$OUT/gpu-tests.log" 2>&1
echo "ctest exit $?"
# The per-case lines of the peer-store tests (ctest keeps a passing test's output only in its log).
"$BUILD/tests/kernel/test_peer_store_gpu" --gtest_filter='PeerStoreEmulated.*:PeerStoreReal.*' >> "$OUT/gpu-tests.log" 2>&1
echo "peer-store tests exit $?"
grep -E "tests passed|tests failed|\[xstage-result\]" "$OUT/gpu-tests.log" | sort | uniq | tail -25

echo "== compute-sanitizer"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$SAN" ]; then
  for tool in memcheck racecheck; do
    timeout 240 "$SAN" --tool $tool --error-exitcode 3 "$BUILD/tests/kernel/test_peer_store_gpu" \
      --gtest_filter='PeerStoreEmulated.EveryTile*' >> "$OUT/sanitize.log" 2>&1
    echo "$tool exit $?" | tee -a "$OUT/sanitize.log"
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize.log"
else
  echo "compute-sanitizer not found" | tee "$OUT/sanitize.log"
fi

if [ "${FOUNDATION_BENCH:-0}" = 1 ]; then
  echo "== attention: this build vs the build before the change, one process"
  timeout 420 python3 bench/attention/bench_attention.py --lib "$BUILD/src/kernels/attention/libxstage_attention.so" \
    --lib-before .carry/before/libxstage_attention.so --out "$OUT/attention" ${BENCH_ARGS:-} 2>&1 | tail -40
fi
