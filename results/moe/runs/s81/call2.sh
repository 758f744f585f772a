#!/usr/bin/env bash
# s81 call 2 (any sm_90 GPU; little device time left): the parts of call 1 that this session's changes need most.
# Carry build/s81b.tar.xz and build/s81c.tar.xz (as call 1).
#   OUT=$OUT bash results/moe/runs/s81/call2.sh
# The MoE Python file (session 80's unrun quantization-error test), the unfused tests (they time nothing now), the
# Ulysses tests (one check_inputs) and bench_moe once (NVML found by PCI bus id: the SM clock columns).
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c2 && mkdir -p "$O"
{
nvidia-smi -L
S=$(mktemp -d) && tar xJf build/s81b.tar.xz -C "$S" || exit 1
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$S/libxstage_attention.so PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
timeout 90 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -q > "$O/test_python_moe.txt" 2>&1
echo "== tests/moe_gpu/test_python_moe.py rc=$? $(tail -1 "$O/test_python_moe.txt")"
for t in test_unfused_gpu test_ulysses_gpu; do
  timeout 90 "$S/$t" > "$O/$t.log" 2>&1
  echo "== $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$O/$t.log" | tr '\n' ' ')"
done
B=$S/bench && mkdir -p $B && tar xJf build/s81c.tar.xz -C $B
timeout 90 $B/bench_moe --shapes dit-moe-xl --tokens 2048 --routing balanced --precision w8a8 --orders wave \
  --worlds 1 --no-stream --block-s 0.05 --warmup-s 0.02 --rounds 1 --out $O/bm > $O/bench_moe.txt 2>&1
echo "== bench_moe rc=$? $(head -1 $O/bench_moe.txt)"
python3 -c "
import json; s = json.load(open('$O/bm/summary.json')); r = s['rows'][0]
print('   correct', s['correct_configs'], 'of', s['configs'], '| order checked', s['fused_vs_unfused_order_checked'],
      'flipped', s['fused_vs_unfused_flipped'], '| sm_clock_mhz', {k: v for k, v in r.items() if k.startswith('sm_clock')})"
rm -f $O/bm/blocks.json
} 2>&1 | tee $O/out.txt
