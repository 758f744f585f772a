#!/usr/bin/env bash
# s68 call 2: the tile-packed W8A8 weights (MoeLayerParams::fp8_packed). Carry build/s68a.tar.xz: this tree's
# test_moe_layer_gpu and bench_moe (stripped) and main d0d9743's bench_moe (bench_moe_main).
#   OUT=$OUT bash results/moe/runs/s68/call2.sh [tests|bench|memcheck|suite]...
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk68 && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s68a.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c2 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a $O/gpu.txt
Q="--shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03"
for step in "$@"; do
  case $step in
    tests)  # the new test and the misuse checks
      timeout 400 $B/test_moe_layer_gpu --gtest_filter='MoeLayerGpu.TilePackedWeights:MoeLayerGpu.RejectsBadInput' > $O/tests.log 2>&1
      echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]" $O/tests.log | tail -6 ;;
    bench)  # packed beside row-major in each process; the new build's default against main's (processes N M M N)
      i=0
      for b in bench_moe bench_moe_main bench_moe_main bench_moe; do
        i=$((i + 1)); extra=""; [ $b = bench_moe ] && extra="--compare-packed"
        timeout 280 $B/$b $Q $extra --out $O/b${i}_$b > $O/b${i}_$b.log 2>&1
        echo "== process $i $b: rc=$?"
        grep -E "^deepseek|fused_interleaved" $O/b${i}_$b.log | head -12
        [ -f $O/b${i}_$b/moe.csv ] && grep -E "fused_interleaved" $O/b${i}_$b/moe.csv | cut -d, -f1,7,10,11,14,16 | head -12
      done ;;
    memcheck)  # the new test under compute-sanitizer (as far as the timeout lets it go)
      timeout 500 compute-sanitizer --tool memcheck --print-limit 20 $B/test_moe_layer_gpu \
        --gtest_filter='MoeLayerGpu.TilePackedWeights' > $O/memcheck.log 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) |OK \]" $O/memcheck.log | tail -4 ;;
    suite)
      timeout 550 $B/test_moe_layer_gpu > $O/suite.log 2>&1
      echo "suite rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]" $O/suite.log | tail -8 ;;
  esac
done
