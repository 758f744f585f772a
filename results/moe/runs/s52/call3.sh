#!/usr/bin/env bash
# s52 call 3 (nvidia-h200): a half Linear-1 tile's four 64-row weight boxes (gate-up interleaved per warpgroup) by one
# 5-d TMA load (KernelParams::tma_w1hw) instead of four 2-d ones. Session 44 measured a stage's loads taking the
# producer ~100 cycles plus ~10 per KB of box to issue, the half tile's four boxes ~500 cycles, a full tile's one 32 KB
# box ~400. The MoE layer GPU tests (merge_loads 0 runs the four-box path, required bit-identical), memcheck and
# racecheck on HalfAndFullTiles, and the fused launch against the build before (O: call 1's bench_moe) in processes
# O N N O: V4-Pro at 2048 tokens on 32 CTAs (every tile a half tile, few SMs streaming: where the producer's issue cost
# shows, session 44), and the V4 W8A8 layers at 8192 tokens (the bar's points).
# build/s52c3.tar.xz: test_moe_layer_gpu, bench_moe (N), bench_moe_old (O), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/tests/moe_gpu build/ab
tar xJf build/s52c3.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/; mv /tmp/bench_moe /tmp/bench_moe_old build/ab/
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O
timeout 300 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 150 $CS --tool $tool --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $O/sanitizer_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/sanitizer_$tool.log | tr '\n' ' ')"
done
mkdir -p $O/ab2k $O/ab8k
BINS="build/ab/bench_moe_old build/ab/bench_moe" OUT=$O/ab2k timeout 150 bash scripts/moe-ab.sh --shapes deepseek-v4-pro \
  --tokens 2048 --routing balanced --precision w8a8 --orders interleaved --worlds 1 --ctas 32 --check-tokens 1 \
  --block-s 0.2 --warmup-s 0.1 2>&1 | tail -3
BINS="build/ab/bench_moe_old build/ab/bench_moe" OUT=$O/ab8k timeout 260 bash scripts/moe-ab.sh \
  --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing balanced,skewed --precision w8a8 \
  --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 2>&1 | tail -5
for d in $O/ab2k/ab $O/ab8k/ab; do grep -hE "^deepseek" $d/*.log; done
