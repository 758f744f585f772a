#!/usr/bin/env bash
# s50 call 5 (nvidia-h200): the routing's trip to the host through a pinned buffer the layer keeps (python/xstage/moe.py):
# xstage.moe's tests, host_probe.py again (call 4: routing_to_host 0.13-0.16 ms), and torch_moe.py's comparison on the
# final code for the record. build/s50c4.tar.xz as call 4 (the library did not change).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c4.tar.xz -C /tmp && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c5 && mkdir -p $O
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
timeout 120 python3 results/moe/runs/s50/host_probe.py > $O/host_probe.log 2>&1; echo "host_probe rc=$?"; tail -2 $O/host_probe.log
timeout 150 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,dit-moe-xl,deepseek-v4-flash --tokens 8192 \
  --json $O/torch_moe.json > $O/torch_moe.log 2>&1
echo "torch_moe rc=$?"; grep -E "^==|xstage|torch-bf16" $O/torch_moe.log | cut -c1-170
cd $O && tar czf ../call5.tgz * && cd .. && rm -rf c5
