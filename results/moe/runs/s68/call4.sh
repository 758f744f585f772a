#!/usr/bin/env bash
# s68 call 4: the tile-packed W8A8 weights in a lean kernel of their own (kPacked), the row-major kernels as on main.
# Carry build/s68c.tar.xz: this tree's bench_moe and test_moe_layer_gpu, main d0d9743's bench_moe (bench_moe_main),
# stripped. Steps: tests (TilePackedWeights, RejectsBadInput), bench (processes N M M N N M M N; N times the packed
# layout beside the row-major one in the same process), suite (every MoE layer GPU test). Everything the call prints is
# in $OUT/c4/out.txt; the bench CSVs in $OUT/c4/csv.tgz (the device returns few files).
#   OUT=$OUT bash results/moe/runs/s68/call4.sh [tests|bench|suite]...
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk68c && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s68c.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O/w
Q="--shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for step in "$@"; do
  case $step in
    tests)
      timeout 300 $B/test_moe_layer_gpu --gtest_filter='MoeLayerGpu.TilePackedWeights:MoeLayerGpu.RejectsBadInput' > $O/w/tests.log 2>&1
      echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|Failure" $O/w/tests.log | tail -8 ;;
    bench)
      i=0
      for b in bench_moe bench_moe_main bench_moe_main bench_moe bench_moe bench_moe_main bench_moe_main bench_moe; do
        i=$((i + 1)); extra=""; [ $b = bench_moe ] && extra="--compare-packed"
        timeout 120 $B/$b $Q $extra --out $O/w/p$i > $O/w/p$i.log 2>&1
        echo "== process $i $b: rc=$?"
        grep -E "^deepseek" $O/w/p$i.log | sed 's/^/   /'
        [ -f $O/w/p$i/moe.csv ] && grep -E "fused_interleaved" $O/w/p$i/moe.csv | cut -d, -f1,7,10,11,14,16
      done ;;
    suite)
      timeout 400 $B/test_moe_layer_gpu > $O/w/suite.log 2>&1
      echo "suite rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]" $O/w/suite.log | tail -8 ;;
  esac
done
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../csv.tgz $(ls -d p*/moe.csv 2>/dev/null) *.log 2>/dev/null)
rm -rf $O/w
