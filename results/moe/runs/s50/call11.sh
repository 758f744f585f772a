#!/usr/bin/env bash
# s50 call 11 (nvidia-h200): after moe_kernel::advise_moe_order (the `auto` query, simulator and choice shared by
# bench_moe and the C ABI): bench_moe's auto columns on Qwen3-30B at 2048 tokens (both routings, W8A8, no timing),
# to compare with the table of record's (results/moe/runs/s48/call7/w8: sim 129.846 / 129.846 us balanced ->
# expert-wave, 218.213 / 214.606 us skewed -> interleaved, lead 22); xstage.moe's tests on the same library.
# build/s50c11.tar.xz: stripped libxstage_attention.so and bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/bench/moe && tar xJf build/s50c11.tar.xz -C /tmp
mv /tmp/libxstage_attention.so build/src/kernels/attention/ && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c11 && mkdir -p $O
timeout 200 build/bench/moe/bench_moe --out $O/auto --shapes qwen3-30b-a3b --tokens 2048 --routing balanced,skewed \
  --precision w8a8 --orders wave,interleaved --worlds 1 --no-time > $O/bench.log 2>&1
echo "bench_moe rc=$?"; tail -3 $O/bench.log
python3 -c "
import json; d=json.load(open('$O/auto/summary.json'))
for r in d['rows']: print(r['shape'], r['routing'], r['tokens'], r.get('sim_wave_us'), r.get('sim_interleaved_us'), r['auto_order'], r['auto_lead'], r['correct'])"
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
cd $O && rm -f */blocks.json && tar czf ../call11.tgz * && cd .. && rm -rf c11
