#!/usr/bin/env bash
# s77 call 2: call 1's first steps in a shorter budget (for the device time left): the tightened MoE layer tests, then
# the peer-store test with every source compared. Carry build/s77a.tar.xz. Summary on stdout, logs in $OUT/c2/logs.tgz.
#   OUT=$OUT bash results/moe/runs/s77/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s77a && mkdir -p $B && { [ -x $B/test_moe_layer_gpu ] || tar xJf build/s77a.tar.xz -C $B; }
source scripts/moe-env.sh
export LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}"
O=$OUT/c2 && mkdir -p $O/w
summary() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]" "$1" | tail -8; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
timeout 100 $B/test_moe_layer_gpu --gtest_filter='MoeLayerGpu.TraceRecordsEveryTile:MoeLayerGpu.FewerTokensThanCapacity:MoeLayerGpu.RejectsBadInput' > $O/w/moe-changed.log 2>&1
echo "test_moe_layer_gpu (changed tests) rc=$?"; summary $O/w/moe-changed.log
timeout 60 $B/test_peer_store_gpu --gtest_filter='PeerStoreEmulated.*' > $O/w/peer.log 2>&1
echo "test_peer_store_gpu (emulated) rc=$?"; summary $O/w/peer.log; grep -c "wrong_bytes=0 bad_counters=0" $O/w/peer.log
timeout 40 $B/test_unfused_gpu --gtest_filter='UnfusedMoeGpu.Linear1*' > $O/w/unfused-changed.log 2>&1
echo "test_unfused_gpu (Linear-1 tests) rc=$?"; summary $O/w/unfused-changed.log
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz *.log *.txt 2>/dev/null)
rm -rf $O/w
