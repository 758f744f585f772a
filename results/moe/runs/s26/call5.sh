#!/usr/bin/env bash
# s26 call 5 (branch wip/pair-rows3, as call 4): is a weight-sharing pair mode a safe default? --compare-pair-rows at
# 32768 tokens (W8A8, 4 shapes) and W4A8 at 8K / 32K (2 shapes), both orders and routings; ncu DRAM bytes of
# DeepSeek-V4-Pro 8K balanced with pair_rows 0 / 2.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
summ() {
python3 - $1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {(r['shape'], r['tokens'], r['routing']): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
for r in rows:
    if r['backend'].startswith('fused'):
        k = (r['shape'], r['tokens'], r['routing'])
        print(f"{r['shape']:16s} {r['tokens']:>5s} {r['precision']} {r['routing']:8s} {r['backend']:22s} {float(r['median_ms']):8.3f} ms "
              f"sp {float(r['spread']):.3f} frac {float(r['tflops']) / ceil[k]:.3f} ratio {float(r['ratio_vs_fused']):.3f} flip {r['flipped']}")
PY
}
el w8-32k
timeout 200 build/bench/moe/bench_moe --out $OUT/w8 --shapes deepseek-v4-pro,deepseek-v3,qwen3-235b-a22b,glm-flash --tokens 32768 \
  --precision w8a8 --orders wave,interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/w8.log 2>&1
echo "w8 rc=$?"; tail -1 $OUT/w8.log; summ $OUT/w8/moe.csv
el w4
timeout 200 build/bench/moe/bench_moe --out $OUT/w4 --shapes deepseek-v4-pro,deepseek-v3 --tokens 8192,32768 \
  --precision w4a8 --orders wave,interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
  > $OUT/w4.log 2>&1
echo "w4 rc=$?"; tail -1 $OUT/w4.log; summ $OUT/w4/moe.csv
el ncu
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 100 "$NCU" -k regex:moe_fused_kernel -c 3 \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
  build/bench/moe/bench_moe --out $OUT/ncu --shapes deepseek-v4-pro --tokens 8192 --routing balanced --precision w8a8 \
  --orders interleaved --compare-pair-rows --worlds 1 --check-tokens 1 --no-time > $OUT/ncu.txt 2>&1
echo "ncu V4-Pro 8K balanced (launches: pair_rows 0, 1, 2)"; grep -E "dram__|lts__|gpu__time" $OUT/ncu.txt
el done
cd $OUT && rm -rf */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
