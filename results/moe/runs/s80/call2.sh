#!/usr/bin/env bash
# s80 call 2 (any GPU with torch). Carry build/s80a.tar.xz (repacked after call 1; only its libxstage_attention.so is
# used).
#   OUT=$OUT bash results/moe/runs/s80/call2.sh
# Call 1 found tests/ulysses/test_torch_layout.py (label cpu, skipped where torch is missing, so never run before)
# failing: its torch.multiprocessing.spawn children re-imported tests/attention/run_pytest.py, which ran pytest again
# in each child. run_pytest.py is now guarded by __name__ == "__main__". This runs that test again, and two GPU test
# files through the same runner to show the runner still counts and exits as before (the Ulysses one with a new check:
# the C ABI names which of q, k, v is a null array; the archive is repacked with that library).
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c2 && mkdir -p "$O"
S=$(mktemp -d) && tar xJf build/s80a.tar.xz -C "$S" ./libxstage_attention.so || exit 1
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$S/libxstage_attention.so PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
{
nvidia-smi -L
for t in tests/ulysses/test_torch_layout.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py; do
  n=$(basename "$t" .py)
  timeout 240 python3 tests/attention/run_pytest.py "$t" > "$O/$n.txt" 2>&1
  echo "== $t rc=$? $(tail -1 "$O/$n.txt")"
done
} 2>&1 | tee "$O/out.txt"
