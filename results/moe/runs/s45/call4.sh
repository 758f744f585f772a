#!/usr/bin/env bash
# s45 call 4: call 3's probe with a __syncwarp before every converter's named barrier (synccheck had flagged the
# epilogue warps of l1-w4ce-mix as divergent there): memcheck, synccheck, racecheck on a short run and the w4 rows
# once more on 132 CTAs from HBM; then main's GPU tests for the record (the fused kernel is s43's, unchanged).
# Carries build/probe45.tar.xz (this session's stripped mainloop_probe) and build/bins.tar.xz (s43's stripped test
# binaries of main's kernel).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe45.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
P=build/bench/moe/mainloop_probe
for tool in memcheck synccheck racecheck; do
  el "sanitizer $tool"
  timeout 120 compute-sanitizer --tool $tool --print-limit 5 $P --pipe-only --src-mb 64 --ctas 4 --kblocks 96 --reps 1 > $OUT/san_$tool.log 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log
done
el "H132"
timeout 150 $P --pipe-only --src-mb 16384 --json $OUT/H132.json > $OUT/H132.log 2>&1
echo "rc=$?"; grep -E "^variant|l1-tma-mix |l1-w4" $OUT/H132.log
el "GPU tests"
mkdir -p build/tests/moe_gpu && tar xJf build/bins.tar.xz -C build/tests/moe_gpu
MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.EmulatedP2:MoeLayerGpu.CtaPairsSingleRank' OUT=$OUT/tests bash scripts/moe-device.sh > $OUT/moe-device.log 2>&1
echo "rc=$?"; tail -5 $OUT/moe-device.log
el done
cd $OUT && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
