#!/usr/bin/env bash
# s52 call 4 (nvidia-h200): call 3's 5-d half-tile weight load again. (1) racecheck on W8A8 half tiles without the
# pingpong variant (call 3's racecheck ran HalfAndFullTiles, whose pingpong = 1 variant racecheck reports on the amax
# exchange, the known s24 limitation): EmptyExpertsAndIdleRanks and SingleRankPartialTiles. (2) The fused launch at
# 8192 tokens in eight processes, O N O N N O N O, on the layers where call 3's two processes each differed.
# build/s52c3.tar.xz (call 3's).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/tests/moe_gpu build/ab
tar xJf build/s52c3.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/; mv /tmp/bench_moe /tmp/bench_moe_old build/ab/
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 150 $CS --tool racecheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.EmptyExpertsAndIdleRanks:MoeLayerGpu.SingleRankPartialTiles' > $O/sanitizer_racecheck.log 2>&1
echo "racecheck rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $O/sanitizer_racecheck.log | tr '\n' ' ')"
BINS="build/ab/bench_moe_old build/ab/bench_moe build/ab/bench_moe_old build/ab/bench_moe" OUT=$O timeout 330 \
  bash scripts/moe-ab.sh --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing balanced,skewed \
  --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 2>&1 | tail -5
for f in $O/ab/*.log; do echo "$(basename $f) $(grep -hE '^deepseek' $f | awk '{print $1"/"$3": "$5}' | tr '\n' ' ')"; done
