#!/usr/bin/env bash
# s34 call 2 (binaries carried as build/bins.tar.xz): half tiles split over K between the MMA warpgroups
# (MoeLayerParams::half_split). GPU tests HalfSplitTiles (new), HalfAndFullTiles, RejectsBadClusters; then the
# split against the default in one process: V4-Pro 2K on 32 CTAs (every tile a half tile), W8A8 8K on four shapes.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/bins.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/ && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
timeout 240 build/tests/moe_gpu/test_moe_layer_gpu --gtest_filter='MoeLayerGpu.HalfSplitTiles:MoeLayerGpu.HalfAndFullTiles:MoeLayerGpu.RejectsBadClusters' > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out|OK \]" $OUT/test.log | head -20
B=build/bench/moe/bench_moe
el "2K on 32 CTAs"
timeout 100 $B --out $OUT/s2k --shapes deepseek-v4-pro --tokens 2048 --routing balanced,skewed --precision w8a8 \
  --orders interleaved --ctas 32 --compare-half-split --compare-control --worlds 1 --check-tokens 1 \
  --block-s 0.1 --warmup-s 0.05 > $OUT/s2k.log 2>&1
echo "rc=$?"; tail -1 $OUT/s2k.log
for v in _hs1 _ctl; do python3 scripts/moe-variant-ratio.py $OUT/s2k/moe.csv $v; done
el "8K"
timeout 300 $B --out $OUT/s8k --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,glm-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-half-split --compare-control --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/s8k.log 2>&1
echo "rc=$?"; grep -E "NO$" $OUT/s8k.log | head; tail -1 $OUT/s8k.log
for v in _hs1 _ctl; do python3 scripts/moe-variant-ratio.py $OUT/s8k/moe.csv $v; done
el done
cd $OUT && rm -f */blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
