#!/usr/bin/env bash
# s31 call 2: the final kernel (l1_ring removed: the fused-kernel sources are 8d11c23's, whose review mend had not run on
# a GPU). The mainloop probe with the RS variant (l1-tma-rs: A from registers, read once per K block); the MoE GPU
# tests; then, if they passed, the table of record (STEPS="w8 w4 merge" of scripts/moe-study.sh).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el probe
timeout 90 build/bench/moe/mainloop_probe --json $OUT/probe.json > $OUT/probe.log 2>&1; echo "probe rc=$?"; cat $OUT/probe.log
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
if [ "$trc" = 0 ]; then
  for st in w8 w4 merge; do
    el "$st"
    OUT=$OUT/study STEPS=$st timeout 120 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
    echo "$st rc=$?"
  done
  grep -E "^configs|^orders|^simulator" $OUT/study.log
  python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
fi
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
