#!/usr/bin/env bash
# s28 call 4: the interleaved lead D on the kernel with l2_borrow (the default): with the slot wait gone, the traced
# Linear-2 tiles' first-stage wait (1.2-3.3 us per tile on DeepSeek-V4-Pro 8K, call 3) is the largest gap left; a
# larger lead gives the rows' Linear-1 tiles more time to finish. --leads 4,8,16,32 beside auto's lead (the plain
# fused_interleaved), W8A8, 8K on five shapes and 32K on two, both routings.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
table() {
python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tf = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['tflops']) for r in rows}
med = {(r['shape'], r['tokens'], r['routing'], r['backend']): float(r['median_ms']) for r in rows}
for k in sorted({k[:3] for k in med}):
    base = med[k + ('fused_interleaved',)]
    cells = [f"{b[len('fused_interleaved_'):]}:{base / v:.3f}" for (s, t, ro, b), v in med.items()
             if (s, t, ro) == k and b.startswith('fused_interleaved_D')]
    print(f"{k[0]:18s} {k[1]:>5s} {k[2]:8s} auto {base:8.3f} ms frac {tf[k + ('fused_interleaved',)] / tf[k + ('ceiling',)]:.3f} "
          f"wave/auto {med[k + ('fused_wave',)] / base:.3f}  time_auto/time_D: " + " ".join(cells))
PY
}
el lead-8k
timeout 200 build/bench/moe/bench_moe --out $OUT/l8 --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3,qwen3-235b-a22b,glm-flash \
  --tokens 8192 --precision w8a8 --orders wave,interleaved --leads 4,8,16,32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/l8.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/l8.log; grep -i "lead" $OUT/l8.log | head -5; table $OUT/l8/moe.csv
el lead-32k
timeout 150 build/bench/moe/bench_moe --out $OUT/l32 --shapes deepseek-v4-pro,deepseek-v3 \
  --tokens 32768 --precision w8a8 --orders wave,interleaved --leads 4,8,16,32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/l32.log 2>&1
echo "bench rc=$?"; tail -1 $OUT/l32.log; table $OUT/l32/moe.csv
el done
cd $OUT && rm -f */blocks.json && tar czf call4.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call4.tgz -exec rm -rf {} +
