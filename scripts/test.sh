#!/usr/bin/env bash
# Builds xstage and runs its tests: `bash scripts/test.sh` runs the CPU suite (label cpu);
# `bash scripts/test.sh gpu` runs the GPU suite (label gpu) on a machine with GPUs.
# XSTAGE_PREBUILT=1 skips the dependency check and the build (a build folder carried to a GPU host).
set -euo pipefail
cd "$(dirname "$0")/.."
label=${1:-cpu}
build=${XSTAGE_BUILD_DIR:-build}
if [ "${XSTAGE_PREBUILT:-0}" != 1 ]; then
  bash scripts/deps.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)"
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Where NCCL ships as the PyPI package nvidia-nccl (GPU hosts with torch), put its library first.
nccl_py=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$nccl_py" ] && [ -d "$nccl_py" ] && export LD_LIBRARY_PATH="$nccl_py:${LD_LIBRARY_PATH:-}"
# GPU tests run one at a time: they share the GPUs, and some of them time the hardware.
jobs=$(nproc)
[ "$label" = gpu ] && jobs=1
ctest --test-dir "$build" -L "^${label}\$" --output-on-failure -j "$jobs"
