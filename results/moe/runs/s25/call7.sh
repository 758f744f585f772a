#!/usr/bin/env bash
# s25 call 7 (branch wip/pair-rows, the last ~2 min of device time): CTA pairs sharing the weights (pair_rows 1):
# its GPU test (bit-identical to single CTAs, W8A8 and W4A8, ghost tiles) and the bad-input test, then DeepSeek-V4-Pro
# 8192 tokens skewed W8A8 with --compare-pair-rows (interleaved only, short blocks).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
timeout 40 build/tests/moe_gpu/test_moe_layer_gpu --gtest_filter=MoeLayerGpu.PairRowsEqualSingleCtas:MoeLayerGpu.RejectsBadInput \
  > $OUT/test.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -12
timeout 70 build/bench/moe/bench_moe --out $OUT/pb --shapes deepseek-v4-pro --tokens 8192 --routing skewed \
  --precision w8a8 --orders interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/pb.log 2>&1
echo "bench rc=$?"; tail -4 $OUT/pb.log
grep -hE "fused|unfused|ceiling" $OUT/pb/moe.csv 2>/dev/null | cut -d, -f10-12
