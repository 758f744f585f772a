#!/usr/bin/env bash
# s54 call 4 (nvidia-h200): Expert-Wave with lagged waves (MoeLayerParams::wave_lag 1: each wave's Linear-2 tiles after
# the next wave's Linear-1 tiles). Call 3's trace: on DiT-MoE-XL 8K a Linear-2 tile waited 11.9 us (128 columns) for
# its row's Linear-1 tiles before its first stage. The MoE layer GPU tests (the lag is a bit-identical variant of every
# Expert-Wave check_batch_timing case), memcheck on RaggedLinear2Tiles, then Expert-Wave beside its lagged form in one
# process over the W8A8 grid (every shape, 2K / 8K / 32K, both routings) and DiT-MoE-XL W4A8.
# build/s54c4.tar.xz: test_moe_layer_gpu and bench_moe, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s54c4.tar.xz -C build/pk
mkdir -p build/tests/moe_gpu build/bench/moe
mv build/pk/test_moe_layer_gpu build/tests/moe_gpu/ && mv build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O/runs
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 100 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.RaggedLinear2Tiles' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tr '\n' ' ')"
row() { awk -F, 'NR>1 && $10 ~ /fused_wave/ {printf "%-18s %-6s %-9s %-14s %8.3f %6.3f %s\n",$1,$6,$7,$10,$11,$16,$17}' $1; }
timeout 230 build/bench/moe/bench_moe --out $O/runs/w8a8 --shapes all --tokens 2048,8192,32768 --routing balanced,skewed \
  --precision w8a8 --orders wave --worlds 1 --check-tokens 1 --compare-wave-lag --block-s 0.04 --warmup-s 0.02 \
  > $O/runs/w8a8.log 2>&1
echo "w8a8 rc=$?"; row $O/runs/w8a8/moe.csv
timeout 60 build/bench/moe/bench_moe --out $O/runs/w4a8 --shapes dit-moe-xl --tokens 2048,8192,32768 --routing balanced,skewed \
  --precision w4a8 --orders wave --worlds 1 --check-tokens 1 --compare-wave-lag --block-s 0.04 --warmup-s 0.02 \
  > $O/runs/w4a8.log 2>&1
echo "w4a8 rc=$?"; row $O/runs/w4a8/moe.csv
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
