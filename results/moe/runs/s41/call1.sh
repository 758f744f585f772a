#!/usr/bin/env bash
# s41 call 1: correctness only (no timing) of main's kernel with emulated ranks at 8192 and 32768 global tokens
# (STEPS=emu of scripts/moe-study.sh): every shape x {W8A8, W4A8} x 2 routings, both orders, P = 1 against the host
# reference and the unfused path, emulated P = 2, 4, 8 bit-identical to P = 1. Carry build/bench/moe/bench_moe.
# CALL names the output archive (call2.sh runs this script again as CALL=call2).
set -uo pipefail
CALL=${CALL:-call1}
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $OUT/machine.txt
for t in 8192 32768; do
  el "emu $t"
  OUT=$OUT/study STEPS=emu EMU_TOKENS=$t timeout ${EMU_TIMEOUT:-270} bash scripts/moe-study.sh > $OUT/emu$t.log 2>&1
  echo "emu $t rc=$?"
  grep -cE "bit-identical to P = 1" $OUT/emu$t.log | sed 's/^/bit-identical lines: /'
  grep -E "DIFFERS|error|Error|FAIL" $OUT/emu$t.log | head -5
  python3 -c "import json; s=json.load(open('$OUT/study/emu$t/summary.json')); print({k: s.get(k) for k in ('configs','correct_configs','emulated_ranks_tested')})"
done
el done
cd $OUT && rm -f study/*/blocks.json && tar czf $CALL.tgz --exclude=$CALL.tgz * && find . -mindepth 1 -maxdepth 1 ! -name $CALL.tgz -exec rm -rf {} +
