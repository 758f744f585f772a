#!/usr/bin/env bash
# s81 call 1 (any sm_90 GPU). Carry build/s81b.tar.xz (every GPU test binary and libxstage_attention.so of the commit after 6d041aa (the unfused tests time nothing),
# scripts/gpu-tests-device.sh pack) and build/s81c.tar.xz (bench_moe, bench_ulysses of 6d041aa, stripped).
#   OUT=$OUT bash results/moe/runs/s81/call1.sh
# What changed on the GPU side: the timeout rule (runtime::require_timeout) of Team::emulated, the communicator and
# xstage_team_create; the Ulysses layer's input check (one check_inputs); the harnesses' NVML device found by PCI bus
# id and the protocol's warm-up agreed across ranks (AgreedTimer::all_done; with one process it is the plain timer).
# Kernels unchanged. So: every GPU test and Python GPU test (session 80's unrun MoE quantization-error test among
# them), a memcheck of the Ulysses refused-call test, and both harnesses once, to see NVML's readings (the SM clock
# columns) found through the PCI bus id.
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c1 && mkdir -p "$O/w"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s81b.tar.xz
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 200 $CS --tool memcheck --error-exitcode 9 build/tests/ulysses/test_ulysses_gpu \
  --gtest_filter='UlyssesEmulated.RefusedCallKeepsTheOutputBuffers' > $O/w/memcheck_ulysses.txt 2>&1
echo "== memcheck ulysses refused call rc=$? $(grep -E 'ERROR SUMMARY' $O/w/memcheck_ulysses.txt)"
B=build/s81c && mkdir -p $B && tar xJf build/s81c.tar.xz -C $B
source scripts/moe-env.sh
timeout 200 $B/bench_moe --shapes dit-moe-xl --tokens 2048 --routing balanced --precision w8a8 --orders wave \
  --worlds 1,2 --no-stream --block-s 0.05 --warmup-s 0.02 --rounds 1 --out $O/w/bm > $O/w/bench_moe.txt 2>&1
echo "== bench_moe rc=$? $(head -1 $O/w/bench_moe.txt)"
python3 -c "
import json; s = json.load(open('$O/w/bm/summary.json')); r = s['rows'][0]
print('   correct', s['correct_configs'], 'of', s['configs'], '| order checked', s['fused_vs_unfused_order_checked'],
      'flipped', s['fused_vs_unfused_flipped'], '| sm_clock_mhz', {k: v for k, v in r.items() if k.startswith('sm_clock')})"
timeout 200 $B/bench_ulysses --quick --ranks 2 --block-s 0.05 --warmup-s 0.02 --out $O/w/ul > $O/w/ulysses.txt 2>&1
echo "== bench_ulysses rc=$? $(head -1 $O/w/ulysses.txt)"; tail -1 $O/w/ulysses.txt
python3 -c "
import json; b = json.load(open('$O/w/ul/blocks.json')); b = b[0] if isinstance(b, list) else b
print('   ulysses nvml', b.get('nvml'), 'first block clock', (b.get('blocks') or [{}])[0].get('sm_clock_mhz'))" 2>&1 | tail -1
} 2>&1 | tee $O/out.txt
rm -f $O/w/bm/blocks.json $O/w/ul/blocks.json
(cd $O/w && tar czf ../c1.tgz ./* 2>/dev/null); rm -rf $O/w
