#!/usr/bin/env bash
# s50 call 1 (nvidia-h200): the MoE layer from Python (xstage.moe over the new C ABI xstage/moe.h in
# libxstage_attention.so): its pytest module, the Python team and Ulysses tests (team.py changed: Team.group), and one
# case under compute-sanitizer memcheck. build/s50c1.tar.xz: the stripped libxstage_attention.so.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c1.tar.xz -C build/src/kernels/attention
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c1 && mkdir -p $O
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" > $O/env.log 2>&1; cat $O/env.log
for t in tests/moe_gpu/test_python_moe.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py; do
  timeout 240 python3 tests/attention/run_pytest.py $t -v > $O/$(basename $t .py).log 2>&1; echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
grep -E "PASSED|FAILED|ERROR|SKIPPED" $O/test_python_moe.log | head -30
grep -E "^E  |Error|assert" $O/test_python_moe.log | head -30
timeout 200 compute-sanitizer --tool memcheck --target-processes all python3 tests/attention/run_pytest.py \
  tests/moe_gpu/test_python_moe.py -k "test_single_rank_matches_reference and w8a8" > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tail -1) $(tail -1 $O/memcheck.log)"
cd $O && tar czf ../call1.tgz * && cd .. && rm -rf c1
