#!/usr/bin/env bash
# s80 call 3 (any GPU with torch). Carry build/s80a.tar.xz (call 2's archive; only its libxstage_attention.so is used).
#   OUT=$OUT bash results/moe/runs/s80/call3.sh
# The MoE Python tests with the quantization errors the audit found untested (test_quantization_errors_are_named).
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c3 && mkdir -p "$O"
S=$(mktemp -d) && tar xJf build/s80a.tar.xz -C "$S" ./libxstage_attention.so || exit 1
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$S/libxstage_attention.so PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
{
nvidia-smi -L
timeout 240 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py -v > "$O/test_python_moe.txt" 2>&1
echo "== tests/moe_gpu/test_python_moe.py rc=$? $(tail -1 "$O/test_python_moe.txt")"
grep -E "PASSED|FAILED|SKIPPED" "$O/test_python_moe.txt" | sed 's/^/   /'
} 2>&1 | tee "$O/out.txt"
