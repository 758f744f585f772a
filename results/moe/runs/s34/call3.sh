#!/usr/bin/env bash
# s34 call 3 (main's kernel; bench_moe carried as build/bins.tar.xz): (a) ncu on the kernels of one layer call (the
# fused kernel, the combine-signal wait, the weighted sum), V4-Pro 8K skewed, clocks not locked: what runs outside
# the fused kernel; (b) the interleaved lead D and the spread row order on the V4 8K layers, same process, beside the
# identical-work control.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/bins.tar.xz -C /tmp bench_moe && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
B=build/bench/moe/bench_moe
for t in "deepseek-v4-pro skewed" "deepseek-v4-flash balanced"; do
  set -- $t
  el "ncu $1 $2"
  timeout 120 "$NCU" -k regex:"moe_fused_kernel|signal_wait_kernel|combine_kernel" -c 3 --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B --out $OUT/ncu-$1-$2 --shapes $1 --tokens 8192 --routing $2 --precision w8a8 \
    --orders interleaved --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$1-$2.txt 2>&1
  echo "rc=$?"; grep -E "^  [a-z_]+.*\(|dram__|gpu__time" $OUT/ncu-$1-$2.txt | sed -E 's/\(xstage::[^)]*\)//g' | cut -c1-110
done
el "leads"
timeout 300 $B --out $OUT/lead --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --precision w8a8 \
  --orders interleaved --leads 2,3,12,24 --compare-row-order --compare-control --worlds 1 --check-tokens 1 \
  --block-s 0.05 --warmup-s 0.03 > $OUT/lead.log 2>&1
echo "rc=$?"; tail -1 $OUT/lead.log
python3 - $OUT/lead/moe.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {(r['shape'], r['routing'], r['backend']): r for r in rows}
for (sh, rt, b), r in sorted(by.items()):
    if b == 'fused_interleaved':
        base = float(r['median_ms']); ceil = float(by[(sh, rt, 'ceiling')]['median_ms'])
        alts = ' '.join(f"{bb[len('fused_interleaved'):]}={float(rr['median_ms'])/base:.3f}{'f' if rr['flipped']=='1' else ''}"
                        for (s2, r2, bb), rr in sorted(by.items()) if s2 == sh and r2 == rt and bb.startswith('fused_interleaved_'))
        print(f"{sh:18s} {rt:8s} {base:7.3f} ms frac {ceil/base:.3f} | {alts}")
PY
el done
cd $OUT && rm -f */blocks.json && tar czf call3.tgz --exclude=call3.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call3.tgz -exec rm -rf {} +
