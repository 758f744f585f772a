#!/usr/bin/env bash
# s49 call 12 (nvidia-h200): after the review mend (runtime::zero_now shared with the MoE workspace, bench_moe's
# poisons on the run's stream, MoeWorkspace::check without a redundant sync, torch_baseline's imports hoisted out of
# the timed call): every MoE layer test, the Python team and Ulysses tests (the torch baseline's two tests among them),
# bench_moe's emulated-rank check. build/s49c12.tar.xz: stripped test_moe_layer_gpu, bench_moe, libxstage_attention.so.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/tests/moe_gpu build/bench/moe build/src/kernels/attention && tar xJf build/s49c12.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/ && mv /tmp/bench_moe build/bench/moe/ && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c12 && mkdir -p $O
timeout 240 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
for t in tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py; do
  timeout 200 python3 tests/attention/run_pytest.py $t > $O/$(basename $t .py).log 2>&1; echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
timeout 100 build/bench/moe/bench_moe --out $O/emu --shapes qwen3-30b-a3b --tokens 2048 --routing skewed --precision w8a8,w4a8 \
  --orders wave,interleaved --worlds 1,2,4,8 --emulated-tokens 2048 --check-tokens 1 --no-time > $O/emu.log 2>&1
echo "emu rc=$? $(grep -c 'bit-identical to P = 1' $O/emu.log) bit-identical, $(grep -c DIFFER $O/emu.log) differ; $(grep '^configs' $O/emu.log)"
cd $O && rm -f */blocks.json && tar czf ../call12.tgz * && cd .. && rm -rf c12
