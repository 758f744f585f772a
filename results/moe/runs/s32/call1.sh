#!/usr/bin/env bash
# s32 call 1: MoeLayerParams::scale_prefetch (the producer prefetches a tile's weight block scale rows into L1 as its
# loads go out; before, each 128-byte line of a scale row was first read by the consumers' per-K-block __ldg, from DRAM
# for a short row's tile). The MoE GPU tests (they flip scale_prefetch 0: bit-identical); --compare-scale-prefetch on
# V4-Pro 2K (every tile a half tile) on 32 and 132 CTAs and on W8A8 8K V4-Pro / V4-Flash, both orders; then the traced
# kernel (its data-wait now summed in a register: the per-K-block global add is gone) on V4-Pro 2K / 32 CTAs and
# V4-Pro 8K skewed, printed per tile kind by scripts/moe-trace-kinds.py.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el tests
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $OUT/test.log 2>&1
trc=$?; echo "tests rc=$trc"; grep -E "^\[  (PASSED|FAILED)|Failure|differs|timed out" $OUT/test.log | head -20
for c in 32 132; do
  el "v4-pro 2K on $c CTAs"
  timeout 90 build/bench/moe/bench_moe --out $OUT/c$c --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
    --precision w8a8 --orders interleaved --ctas $c --compare-scale-prefetch --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/c$c.log 2>&1
  echo "rc=$?"; grep -E "fused" $OUT/c$c/moe.csv | cut -d, -f10,11,16,17
  python3 scripts/moe-variant-ratio.py $OUT/c$c/moe.csv _p0
done
el "8K V4"
timeout 200 build/bench/moe/bench_moe --out $OUT/v4 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --precision w8a8 --orders wave,interleaved --compare-scale-prefetch --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $OUT/v4.log 2>&1
echo "rc=$?"; grep -E "^deepseek" $OUT/v4.log | head -8
python3 scripts/moe-variant-ratio.py $OUT/v4/moe.csv _p0
for t in "2048 balanced 32" "8192 skewed 132"; do
  set -- $t
  el "trace $1 $2 $3 CTAs"
  timeout 90 build/bench/moe/bench_moe --out $OUT/tr$1 --shapes deepseek-v4-pro --tokens $1 --routing $2 --ctas $3 \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
    --trace --trace-csv $OUT/tr$1/tiles.csv > $OUT/tr$1.log 2>&1
  echo "rc=$?"; gzip -f $OUT/tr$1/tiles.csv
  python3 scripts/moe-trace-kinds.py $OUT/tr$1/tiles.csv.gz | head -9
done
el done
cd $OUT && rm -f */blocks.json && tar czf call1.tgz --exclude=call1.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call1.tgz -exec rm -rf {} +
