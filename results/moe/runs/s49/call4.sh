#!/usr/bin/env bash
# s49 call 4 (nvidia-h200): the kernel back at main's (eighth tiles not kept), the new W4A8EveryTileWidth test; bench_ulysses
# under a launcher with one rank (a real team of one; its nccl_a2a after wait_nccl's spin); the torch baseline's new
# spread columns.
#   build/s49c4.tar.xz: stripped test_moe_layer_gpu, bench_ulysses, xstage, libxstage_attention.so.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/ulysses build/tests/moe_gpu build/src/kernels/attention build/src/cli && tar xJf build/s49c4.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/ && mv /tmp/bench_ulysses build/bench/ulysses/ && mv /tmp/xstage build/src/cli/
mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
O=$OUT/c4 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
F='MoeLayerGpu.W4A8EveryTileWidth:MoeLayerGpu.HalfAndFullTiles:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls'
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu --gtest_filter="$F" > $O/tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |OK \]" $O/tests.log
el sanitizers
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 150 $SAN --tool $tool --error-exitcode 3 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.W4A8EveryTileWidth' >> $O/sanitize.log 2>&1
  echo "$tool exit $?"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK" $O/sanitize.log | head
el bench_ulysses-real1
timeout 90 build/src/cli/xstage launch -n 1 --timeout 80 -- build/bench/ulysses/bench_ulysses --seq 8K,32K --heads-per-rank 3,6 \
  --block-s 0.1 --warmup-s 0.05 --rounds 2 --out $O/ulysses-real1 > $O/ulysses-real1.log 2>&1; echo "rc=$?"; tail -9 $O/ulysses-real1.log
el torch-real1
timeout 100 torchrun --nproc-per-node 1 bench/ulysses/torch_baseline.py --seq 8K,16K --heads-per-rank 3,6 --block-s 0.2 \
  --rounds 2 --out $O/torch-real1 > $O/torch-real1.log 2>&1; echo "rc=$?"; grep -E "^ +[0-9]|Error" $O/torch-real1.log
el done
cd $O && rm -f */blocks.json && tar czf ../call4.tgz * && cd .. && rm -rf c4
