#!/usr/bin/env bash
# s49 call 10 (nvidia-h200): call 9's peer-store tests again, with libxstage_attention.so carried (call 9 lacked it:
# rc 127) and memcheck, racecheck on the emulated ones. build/s49c10.tar.xz: stripped test_peer_store_gpu and the library.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/tests/kernel build/src/kernels/attention && tar xJf build/s49c10.tar.xz -C /tmp
mv /tmp/test_peer_store_gpu build/tests/kernel/ && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
O=$OUT/c10 && mkdir -p $O
timeout 120 build/tests/kernel/test_peer_store_gpu > $O/test_peer_store_gpu.log 2>&1
echo "test_peer_store_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_peer_store_gpu.log | tr '\n' ' ')"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck racecheck; do
  timeout 120 $SAN --tool $tool --error-exitcode 3 build/tests/kernel/test_peer_store_gpu --gtest_filter='PeerStoreEmulated.*' \
    >> $O/sanitize.log 2>&1; echo "$tool exit $?"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $O/sanitize.log
cd $O && tar czf ../call10.tgz * && cd .. && rm -rf c10
