#!/usr/bin/env bash
# s28 call 7: W4A8 at 32K with long blocks (0.3 s blocks, 0.2 s warm-ups, 2 ABBA rounds), l2_borrow (default) against
# the slot (_b0), both orders, unfused and the ceiling in the same process: the table of call 6 had DeepSeek-V3 W4A8
# balanced 32K at 0.987 (auto's Interleaved with a 13 % spread at 0.05 s blocks; one 37 ms layer per block), and W4A8
# (3 stages) was measured with l2_borrow only at 8K (call 3: 0.986-1.009).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el w4-long
timeout 280 build/bench/moe/bench_moe --out $OUT/w4 --shapes deepseek-v3,deepseek-v4-pro --tokens 32768 \
  --precision w4a8 --orders wave,interleaved --compare-borrow --worlds 1 --check-tokens 1 --block-s 0.3 --warmup-s 0.2 --rounds 2 \
  > $OUT/w4.log 2>&1
echo "bench rc=$?"; grep -E "^deepseek" $OUT/w4.log
python3 - $OUT/w4/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for r in rows:
    k = (r['shape'], r['tokens'], r['routing'])
    if r['backend'].startswith('fused'):
        o = 'fused_' + r['backend'].split('_')[1]
        print(f"{r['shape']:18s} {r['routing']:8s} {r['backend']:24s} {float(r['median_ms']):8.3f} ms spread {float(r['spread']):.3f} "
              f"unfused/this {med[k + ('unfused',)] / float(r['median_ms']):.3f} vs_order_base {float(r['median_ms'])/med[k + (o,)]:.3f} flip {r['flipped']}")
PY
el done
cd $OUT && rm -f */blocks.json && tar czf call7.tgz --exclude=call7.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call7.tgz -exec rm -rf {} +
