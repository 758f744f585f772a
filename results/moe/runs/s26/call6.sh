#!/usr/bin/env bash
# s26 call 6 (branch wip/pair-rows3 at the pair_share commit): every MoE GPU test (own process each), then the table
# of record: STEPS="w8 w4 merge" of scripts/moe-study.sh (the 84-point grid, both orders, emulated P = 2, 4, 8
# bit-identity), with MoeLayerParams::pair_share auto (weight-sharing pairs on DeepSeek-V3 and V4-Pro).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el tests
MOE_TEST_BINS=build/tests/moe_gpu/test_moe_layer_gpu MOE_SANITIZE=0 MOE_TEST_TIMEOUT=60 OUT=$OUT/tests \
  timeout 170 bash scripts/moe-device.sh > $OUT/tests.log 2>&1
echo "tests ok: $(grep -c 'rc=0 ' $OUT/tests/moe-tests.log) of $(grep -c 'rc=' $OUT/tests/moe-tests.log)"
grep -A14 "rc=[1-9]" $OUT/tests/moe-tests.log | head -30
for st in w8 w4 merge; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 260 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
el done
cd $OUT && rm -f study/*/blocks.json && tar czf call6.tgz --exclude=call6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call6.tgz -exec rm -rf {} +
