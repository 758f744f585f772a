#!/usr/bin/env bash
# s82 call 1 (any sm_90 GPU): the whole GPU suite of main (nothing but MoE Python, unfused and Ulysses has run since
# session 81's changes: the timeout rule, check_arrays, the warm-up agreement), then bench_ulysses --quick (its
# per-row order flags have not run) and bench_moe once. Carry build/s82a.tar.xz (suite) and build/s82b.tar.xz
# (bench_moe, bench_ulysses of the same main).
#   OUT=$OUT bash results/moe/runs/s82/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c1 && mkdir -p "$O"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s82a.tar.xz
B=$(mktemp -d) && tar xJf build/s82b.tar.xz -C $B || exit 1
source scripts/moe-env.sh
export LD_LIBRARY_PATH=$(realpath build/src/kernels/attention):${LD_LIBRARY_PATH:-}
timeout 120 $B/bench_ulysses --quick --ranks 2 --out $O/bu > $O/bench_ulysses.txt 2>&1
echo "== bench_ulysses rc=$?"; tail -12 $O/bench_ulysses.txt
python3 -c "
import json; s = json.load(open('$O/bu/summary.json'))
print('   summary keys with flip/order:', {k: v for k, v in s.items() if 'flip' in k or 'order' in k})"
timeout 90 $B/bench_moe --shapes dit-moe-xl --tokens 2048 --routing balanced --precision w8a8 --orders wave \
  --worlds 1 --no-stream --block-s 0.05 --warmup-s 0.02 --rounds 1 --out $O/bm > $O/bench_moe.txt 2>&1
echo "== bench_moe rc=$? $(head -1 $O/bench_moe.txt)"
rm -f $O/bm/blocks.json $O/bu/blocks.json
} 2>&1 | tee $O/out.txt
