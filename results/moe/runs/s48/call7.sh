#!/usr/bin/env bash
# s48 call 7: the table of record (P = 1) on the final build (W4A8 quarter tiles, the receive-buffer limit in TMA rows):
# STEPS="w8 w4 merge emu" of scripts/moe-study.sh (84 points at P = 1, both orders, emulated P = 2, 4, 8 at 2048 tokens;
# then emulated P = 2, 4, 8 at 8192 and 32768 tokens, correctness only), on GPU 0. (The GPU tests and sanitizers of
# this kernel ran in calls 4-6.) build/s48c6.tar.xz: the stripped bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s48c6.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
export CUDA_VISIBLE_DEVICES=0
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for st in ${T7_STEPS:-w8 w4 merge emu}; do
  el "$st"
  OUT=$OUT/study STEPS=$st timeout 200 bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $OUT/study.log
python3 -c "import json; s=json.load(open('$OUT/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
for t in 8192 32768; do
  python3 -c "import json; s=json.load(open('$OUT/study/emu$t/summary.json')); print($t, {k: s.get(k) for k in ('configs','correct_configs','emulated_ranks_tested')})" 2>&1 | tail -1
done
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
