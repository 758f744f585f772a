# shellcheck shell=bash
# Sourced by the MoE device scripts (moe-device.sh, moe-study.sh, moe-diag.sh): NVLink multicast off, NCCL's
# PyPI library first where it ships that way, and cuBLASLt 13 for the unfused baseline (the toolkit's, else the
# one torch's wheels bring).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nccl_py=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$nccl_py" ] && export LD_LIBRARY_PATH="$nccl_py:${LD_LIBRARY_PATH:-}"
for d in /usr/local/cuda/lib64 $(python3 -c "import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], 'lib'))" 2>/dev/null); do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:$d"
done
