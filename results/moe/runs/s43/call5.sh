#!/usr/bin/env bash
# s43 call 5: do the weight block scales' per-K-block loads (__ldg, first touch per tile) lengthen the consumers'
# chain? debug-s43.patch bit 64: the scales not loaded (1.0; results wrong on purpose). Untraced, processes in the
# order 0 64 64 0: V4-Pro 2K on 32 CTAs; V4-Pro 8K (both routings) on all SMs. Then bit 64 traced (2K, 32 CTAs).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/dbg43.tar.xz -C build/bench/moe
source scripts/moe-env.sh
B=build/bench/moe/bench_moe_dbg
i=0
for b in 0 64 64 0; do
  i=$((i + 1))
  XSTAGE_DEBUG_TAIL=$b timeout 120 $B --out $OUT/s$i-b$b --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
    --precision w8a8 --orders interleaved --ctas 32 --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 \
    > $OUT/s$i-b$b.log 2>&1
  echo "2K/32 bits $b rc=$? $(grep -E '^deepseek' $OUT/s$i-b$b.log | awk '{print "fused", $5, "ms"}')"
done
i=0
for b in 0 64 64 0; do
  i=$((i + 1))
  XSTAGE_DEBUG_TAIL=$b timeout 150 $B --out $OUT/e$i-b$b --shapes deepseek-v4-pro --tokens 8192 --routing balanced,skewed \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.1 --warmup-s 0.05 \
    > $OUT/e$i-b$b.log 2>&1
  echo "8K bits $b rc=$? $(grep -E '^deepseek' $OUT/e$i-b$b.log | awk '{print $3, "fused", $5, "ceil", $7}' | tr '\n' ' ')"
done
mkdir -p $OUT/t64
XSTAGE_DEBUG_TAIL=64 timeout 120 $B --out $OUT/t64 --shapes deepseek-v4-pro --tokens 2048 --routing balanced \
  --precision w8a8 --orders interleaved --ctas 32 --worlds 1 --check-tokens 1 --block-s 0.02 --warmup-s 0.01 \
  --trace --trace-csv $OUT/t64/tiles.csv > $OUT/t64.log 2>&1
python3 scripts/moe-trace-kinds.py $OUT/t64/tiles.csv | grep -v '^    '
gzip -f $OUT/t64/tiles.csv
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
