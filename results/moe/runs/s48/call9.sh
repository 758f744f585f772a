#!/usr/bin/env bash
# s48 call 9 (nvidia-h200): the final build's MoE GPU tests (after the test refactor quantize_experts) with memcheck on
# SingleRank, W4A8SingleRank and HalfAndFullTiles, and the emulated-rank check at 8192 and 32768 tokens (scripts/moe-study.sh
# STEPS=emu: every shape x {W8A8, W4A8} x 2 routings, both orders, P = 1 against the host reference and the unfused path,
# emulated P = 2, 4, 8 against P = 1 bit for bit; no timing). build/s48c9.tar.xz: the stripped test binaries and bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/tests/moe_gpu && tar xJf build/s48c9.tar.xz -C /tmp
mv /tmp/bench_moe build/bench/moe/
mv /tmp/test_moe_layer_gpu /tmp/test_fp8_wgmma_gpu /tmp/test_unfused_gpu /tmp/test_unfused_ep_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
mkdir -p $OUT/tests
MOE_SAN_TOOLS=memcheck MOE_TEST_BINS="build/tests/moe_gpu/test_moe_layer_gpu build/tests/moe_gpu/test_fp8_wgmma_gpu build/tests/moe_gpu/test_unfused_gpu build/tests/moe_gpu/test_unfused_ep_gpu" \
MOE_SAN_FILTER='MoeLayerGpu.SingleRank:MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.HalfAndFullTiles' \
  OUT=$OUT/tests bash scripts/moe-device.sh 2>&1 | grep -E "passed:|FAILED|exit|SUMMARY" | head -20
el emu
OUT=$OUT/study STEPS=emu timeout 150 bash scripts/moe-study.sh > $OUT/study.log 2>&1
echo "emu rc=$?"
grep -E "^configs|DIFFER|error" $OUT/study.log
for t in 8192 32768; do
  python3 -c "import json; s=json.load(open('$OUT/study/emu$t/summary.json')); print($t, {k: s.get(k) for k in ('configs','correct_configs','emulated_ranks_tested')})" 2>&1 | tail -1
done
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call9.tgz --exclude=call9.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call9.tgz -exec rm -rf {} +
