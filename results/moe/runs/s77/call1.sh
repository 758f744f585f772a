#!/usr/bin/env bash
# s77 call 1: the GPU tests whose checks session 77 tightened (any sm_90 GPU; test code only, no kernel changed):
# outputs poisoned before the calls they compare (MoeLayerGpu.TraceRecordsEveryTile, FewerTokensThanCapacity; the
# unfused Linear-1 padding rows; the two Python calls), every source's tiles compared in the peer-store test
# (PeerStoreEmulated.*), RejectsBadInput without the shape checks that moved to a CPU test; then the Python tests and
# the whole test_unfused_gpu suite. With the argument `short` (about 200 s): the first three steps only. Carry
# build/s77a.tar.xz (main dbf55de's three test binaries and libxstage_attention.so, stripped). Prints a short summary;
# logs in $OUT/c1/logs.tgz.
#   OUT=$OUT bash results/moe/runs/s77/call1.sh [short]
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
short=${1:-}
B=build/s77a && mkdir -p $B && { [ -x $B/test_moe_layer_gpu ] || tar xJf build/s77a.tar.xz -C $B; }
source scripts/moe-env.sh
export LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}"
O=$OUT/c1 && mkdir -p $O/w
summary() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]" "$1" | tail -8; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
timeout 120 $B/test_moe_layer_gpu --gtest_filter='MoeLayerGpu.TraceRecordsEveryTile:MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.RejectsBadInput' > $O/w/moe-changed.log 2>&1
echo "test_moe_layer_gpu (changed tests) rc=$?"; summary $O/w/moe-changed.log
timeout 60 $B/test_peer_store_gpu --gtest_filter='PeerStoreEmulated.*' > $O/w/peer.log 2>&1
echo "test_peer_store_gpu (emulated) rc=$?"; summary $O/w/peer.log; grep -c "wrong_bytes=0 bad_counters=0" $O/w/peer.log
timeout 40 $B/test_unfused_gpu --gtest_filter='UnfusedMoeGpu.Linear1*' > $O/w/unfused-changed.log 2>&1
echo "test_unfused_gpu (Linear-1 tests) rc=$?"; summary $O/w/unfused-changed.log
if [ "$short" != short ]; then
  export XSTAGE_ATTENTION_LIB="$PWD/$B/libxstage_attention.so" PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1
  timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -k "float8_inputs_as_given or fewer_tokens_than_capacity" > $O/w/python-changed.log 2>&1
  echo "test_python_moe (changed tests) rc=$? $(tail -1 $O/w/python-changed.log)"
  timeout 80 $B/test_unfused_gpu > $O/w/unfused.log 2>&1
  echo "test_unfused_gpu (all) rc=$?"; summary $O/w/unfused.log
fi
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz *.log *.txt 2>/dev/null)
rm -rf $O/w
