#!/usr/bin/env bash
# s54 call 3 (nvidia-h200): the final build (auto keeps 128-column Linear-2 tiles where 256 would be ragged; ragged 256
# an explicit l2_cols). The MoE layer GPU tests, memcheck on RaggedLinear2Tiles and RejectsBadClusters, then the traced
# kernel on DiT-MoE-XL W8A8 Expert-Wave at 8K and 32K with 128 and with 256 (ragged) columns: per-tile mainloop rates
# and makespans, to see why 256 loses at 8K. build/s54c3.tar.xz: test_moe_layer_gpu and bench_moe, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s54c3.tar.xz -C build/pk
mkdir -p build/tests/moe_gpu build/bench/moe
mv build/pk/test_moe_layer_gpu build/tests/moe_gpu/ && mv build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O/runs
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|RaggedLinear2Tiles|RejectsBadClusters|RandomValid" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 150 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RaggedLinear2Tiles:MoeLayerGpu.RejectsBadClusters' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tr '\n' ' ')"
for c in 128 256; do
  timeout 100 build/bench/moe/bench_moe --out $O/runs/n$c --shapes dit-moe-xl --tokens 8192,32768 --routing balanced \
    --precision w8a8 --orders wave --worlds 1 --check-tokens 1 --l2-cols $c --trace \
    --block-s 0.05 --warmup-s 0.03 > $O/runs/n$c.log 2>&1
  echo "l2_cols $c rc=$?"; cut -d, -f2,6,7,8,9,10,11,12,13,14 $O/runs/n$c/trace_summary.csv
done
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
