#!/usr/bin/env bash
# s70 call 1: the MoE GPU tests after the tile-packed W8A8 option was removed (the kernel code is d0d9743's again):
# every MoE layer GPU test (emulated P = 2, 4, 8 among them; RejectsBadInput without the fp8_packed cases) and the MoE
# Python tests through the C ABI (without "w8a8-packed"). Carry build/s70a.tar.xz (this tree's test_moe_layer_gpu and
# libxstage_attention.so, stripped). Everything the call prints is in $OUT/c1/out.txt, the logs in $OUT/c1/logs.tgz.
#   OUT=$OUT bash results/moe/runs/s70/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70a && mkdir -p $B && { [ -x $B/test_moe_layer_gpu ] || tar xJf build/s70a.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O/w
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
timeout 420 $B/test_moe_layer_gpu > $O/w/suite.log 2>&1
echo "test_moe_layer_gpu rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]" $O/w/suite.log | tail -8
export XSTAGE_ATTENTION_LIB="$PWD/$B/libxstage_attention.so" PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1
timeout 150 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/w/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/w/test_python_moe.log)"
grep -E "FAILED|Error" $O/w/test_python_moe.log | head -5
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz *.log *.txt 2>/dev/null)
rm -rf $O/w
