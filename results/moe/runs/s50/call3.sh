#!/usr/bin/env bash
# s50 call 3 (nvidia-h200): the host half of a layer call made cheaper (prepare_moe_layer: the plan without its
# combine map, moved instead of copied, its index / pos tables inserted as slices, the host table image kept between
# calls). The MoE layer GPU tests and xstage.moe's tests on the new library; then the Python call's time, old library
# (call 1's, libold.so) against new, in processes O N N O (bench/moe/torch_moe.py, xstage backends only); then
# torch_moe.py's full comparison on the new library. build/s50c3.tar.xz: libxstage_attention.so, libold.so,
# test_moe_layer_gpu (stripped).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention build/tests/moe_gpu && tar xJf build/s50c3.tar.xz -C /tmp
mv /tmp/libxstage_attention.so /tmp/libold.so build/src/kernels/attention/ && mv /tmp/test_moe_layer_gpu build/tests/moe_gpu/
source scripts/moe-env.sh
NEW=$(realpath build/src/kernels/attention/libxstage_attention.so) OLD=$(realpath build/src/kernels/attention/libold.so)
export XSTAGE_ATTENTION_LIB=$NEW PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c3 && mkdir -p $O
timeout 200 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
i=0
for lib in OLD NEW NEW OLD; do
  i=$((i+1))
  XSTAGE_ATTENTION_LIB=${!lib} timeout 90 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,deepseek-v4-flash \
    --backends xstage,xstage-fp8in --block 0.4 --warmup 0.2 --json $O/ab$i-$lib.json > $O/ab$i-$lib.log 2>&1
  echo "ab$i $lib rc=$? $(python3 -c "
import json,sys; d=json.load(open('$O/ab$i-$lib.json'))
print('  '.join(f\"{r['shape']}: {r['stats']['xstage']['median_ms']:.3f} / {r['stats']['xstage-fp8in']['median_ms']:.3f} ms\" for r in d['rows']))")"
done
timeout 150 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,dit-moe-xl,deepseek-v4-flash --tokens 8192 \
  --json $O/torch_moe.json > $O/torch_moe.log 2>&1
echo "torch_moe rc=$?"; grep -E "^==|xstage|torch-bf16" $O/torch_moe.log | cut -c1-170
cd $O && tar czf ../call3.tgz * && cd .. && rm -rf c3
