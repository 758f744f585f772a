#!/usr/bin/env bash
# s49 call 2 (nvidia-h200): the C ABI's NULL stream is now CUDA's default stream (it was the team's own stream, so
# xstage's Python calls on torch's default stream ran unordered with torch's work: the torch baseline's MISMATCH).
#   1. the Python GPU tests of the attention module, teams and the Ulysses layer (new: ordering on torch's stream);
#   2. torch_baseline.py --emulate 2 / 4 / 8 over the real-rank grid's shapes (checks only);
#   3. torch_baseline.py under torchrun with one real rank (timed; P = 1: attention against cuDNN SDPA).
# build/s49c2.tar.xz: the stripped libxstage_attention.so of this build.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s49c2.tar.xz -C /tmp && mv /tmp/libxa.so build/src/kernels/attention/libxstage_attention.so
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p $OUT/c2 && cd $OUT/c2 && cd - > /dev/null
O=$OUT/c2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el pytest
for t in tests/ulysses/test_python_ulysses.py tests/attention/test_python_team.py tests/attention/test_python_module.py; do
  timeout 150 python3 tests/attention/run_pytest.py $t > $O/pytest-$(basename $t .py).log 2>&1
  echo "$t rc=$?"; tail -1 $O/pytest-$(basename $t .py).log
done
el emulated
timeout 200 python3 bench/ulysses/torch_baseline.py --emulate 2 --seq 8K,16K,32K,64K --heads-per-rank 3,6,12 \
  --out $O/torch-emu2 > $O/torch-emu2.log 2>&1; echo "emu2 rc=$?"; grep -E "^ +[0-9]|Error" $O/torch-emu2.log
for P in 4 8; do
  timeout 100 python3 bench/ulysses/torch_baseline.py --emulate $P --seq 16K,32K --heads-per-rank 3 \
    --out $O/torch-emu$P > $O/torch-emu$P.log 2>&1; echo "emu$P rc=$?"; grep -E "^ +[0-9]|Error" $O/torch-emu$P.log
done
el torchrun-1
timeout 150 torchrun --nproc-per-node 1 bench/ulysses/torch_baseline.py --seq 8K,16K,32K --heads-per-rank 3,6 --block-s 0.2 \
  --rounds 2 --out $O/torch-real1 > $O/torch-real1.log 2>&1; echo "real1 rc=$?"; grep -E "^ +[0-9]|Error" $O/torch-real1.log
el done
cd $O && tar czf ../call2.tgz * && cd .. && rm -rf c2
