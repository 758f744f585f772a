#!/usr/bin/env bash
# s78 call 3 (any sm_90 card): main 8d68e82's GPU code after the order simulator's rate fix (7c9c4cc: a tile at one SM's
# rate whatever the CTA count; auto's simulated times at emulated P > 1 and with fewer CTAs change) and stream_probe's
# SM-relative CTA counts (3a79a76). Carry build/s78b.tar.xz (test_moe_layer_gpu, libxstage_attention.so, stream_probe,
# stripped). The whole MoE layer suite, the Python MoE tests (auto_order among them), and a short stream_probe run
# (its rows on this GPU's SM count; on 132 SMs the same rows as before).
#   OUT=$OUT bash results/moe/runs/s78/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s78b && mkdir -p $B && { [ -x $B/test_moe_layer_gpu ] || tar xJf build/s78b.tar.xz -C $B; }
source scripts/moe-env.sh
export LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}"
export XSTAGE_ATTENTION_LIB="$PWD/$B/libxstage_attention.so" PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1
O=$OUT/c3 && mkdir -p $O/w
{
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 $B/test_moe_layer_gpu > $O/w/moe.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/w/moe.log | tr '\n' ' ')"; grep -E "FAILED \]" $O/w/moe.log | head
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/w/python-moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/w/python-moe.log)"
timeout 120 $B/stream_probe --gb 4 --reps 1 --csv $O/w/stream.csv > $O/w/stream.log 2>&1
echo "stream_probe rc=$? rows=$(($(wc -l < $O/w/stream.csv) - 1))"; head -12 $O/w/stream.log
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz * 2>/dev/null)
rm -rf $O/w
