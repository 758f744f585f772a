#!/usr/bin/env bash
# s48 call 8 (nvidia-h200-x2): the P = 1 table of record on the final MoE build (call7.sh, GPU 0), then two Ulysses
# checks with real ranks (build/s48u.tar.xz): the torch baseline on one shape per process (is call-s48's MISMATCH after
# the first shape a state carried between shapes?), and the harness with ncclAlltoAll waited for (non-blocking comm).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
T7_STEPS="w8 w4 merge" bash results/moe/runs/s48/call7.sh
mkdir -p build/bench/ulysses build/src/kernels/attention build/src/cli
tar xJf build/s48u.tar.xz -C /tmp
mv /tmp/bench_ulysses build/bench/ulysses/ && mv /tmp/libxstage_attention.so build/src/kernels/attention/
mv /tmp/xstage build/src/cli/ && rm -f /tmp/test_ulysses_gpu
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nccl_py=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$nccl_py" ] && export LD_LIBRARY_PATH="$nccl_py:${LD_LIBRARY_PATH:-}"
unset CUDA_VISIBLE_DEVICES
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p $OUT/u
for shp in "16K 6" "8K 6" "8K 3"; do
  set -- $shp
  el "torch $1 $2"
  XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python \
    timeout 60 torchrun --nproc-per-node 2 bench/ulysses/torch_baseline.py --seq $1 --heads-per-rank $2 --block-s 0.1 \
    --rounds 1 > $OUT/u/torch-$1-$2.log 2>&1
  echo "rc=$? $(grep -E "torch .* us" $OUT/u/torch-$1-$2.log)"
done
el harness
build/src/cli/xstage launch -n 2 --timeout 150 -- build/bench/ulysses/bench_ulysses --seq 8K,16K,32K --heads-per-rank 3,6 \
  --out $OUT/u/study > $OUT/u/harness.log 2>&1
echo "harness rc=$?"; grep -vE "^\s*$" $OUT/u/harness.log | tail -12
el done
cd $OUT && tar czf ulysses8.tgz u && rm -rf u
