#!/usr/bin/env bash
# s48 call 6 (nvidia-h200-x2): the receive-buffer limit as TMA rows (2^31 rows), not bytes, and the EP = 2 studies.
#   build/s48c6.tar.xz: stripped bench_moe, xstage, test_moe_layer_gpu (call 5's N + the limit change).
#   1. RejectsBadInput and the real-rank tests; P = 1 on GPU 0: a layer whose receive buffer is past 2^31 bytes
#      (custom 7168/256/16/8, 40000 tokens: 322032 rows x 7168 B), W8A8 and W4A8, both orders, against the host reference
#      on 8 tokens and the unfused path on every token;
#   2. scripts/moe-study.sh with RANKS=2, steps in STUDY_STEPS (default w8 w4 dsweep).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu build/src/cli && tar xJf build/s48c6.tar.xz -C /tmp
mv /tmp/bench_moe build/bench/moe/ && mv /tmp/xstage build/src/cli/ && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
build/tests/moe_gpu/test_moe_layer_gpu --gtest_filter='MoeLayerGpu.RejectsBadInput:MoeLayerReal.*' > $OUT/tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|OK \]" $OUT/tests.log | head
el big
CUDA_VISIBLE_DEVICES=0 timeout 150 build/bench/moe/bench_moe --out $OUT/big --custom big:7168:256:16:8 --tokens 40000 \
  --precision w8a8,w4a8 --orders wave,interleaved --check-tokens 8 --no-time > $OUT/big.log 2>&1
echo "big rc=$?"; grep -E "^big|error|DIFFER|configs" $OUT/big.log
for st in ${STUDY_STEPS:-w8 w4 dsweep}; do
  el "$st"
  OUT=$OUT/study RANKS=2 LAUNCH_TIMEOUT=${STEP_TIMEOUT:-200} STEPS=$st bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator|DIFFER|error" $OUT/study.log
el done
cd $OUT && rm -f */blocks.json */*/blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
