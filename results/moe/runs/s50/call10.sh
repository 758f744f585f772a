#!/usr/bin/env bash
# s50 call 10 (nvidia-h200): the final code's Python tests: xstage.moe (with order="auto", xstage_moe_auto_order; the C
# ABI's create nulling its handle first), the Python team and Ulysses tests (team.py changed), the two-rank worker under
# torchrun with one process. build/s50c10.tar.xz: the stripped libxstage_attention.so.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c10.tar.xz -C build/src/kernels/attention
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c10 && mkdir -p $O
for t in tests/moe_gpu/test_python_moe.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py; do
  timeout 200 python3 tests/attention/run_pytest.py $t > $O/$(basename $t .py).log 2>&1; echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
timeout 200 torchrun --nproc-per-node 1 tests/moe_gpu/moe_two_ranks.py > $O/torchrun1.log 2>&1; echo "torchrun 1 rc=$?"
grep -E "rank|PASS" $O/torchrun1.log | head -4
python3 tests/moe_gpu/check_python_moe_abi.py > $O/abi.log 2>&1; echo "abi rc=$? $(tail -1 $O/abi.log)"
cd $O && tar czf ../call10.tgz * && cd .. && rm -rf c10
