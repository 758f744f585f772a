#!/usr/bin/env bash
# s50 call 9 (nvidia-h200): bench/moe/torch_moe.py with torch's FP8 grouped GEMM (torch._scaled_grouped_mm, rowwise)
# beside the bf16 one, every backend from the same bf16 weights, each one's error against one float64 layer
# on the bf16 inputs. build/s50c7.tar.xz as call 7.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c7.tar.xz -C build/src/kernels/attention
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c9 && mkdir -p $O
timeout 300 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,dit-moe-xl,deepseek-v4-flash,glm-flash --tokens 8192 \
  --json $O/torch_moe.json > $O/torch_moe.log 2>&1
echo "torch_moe rc=$?"; grep -E "^==|xstage|torch-|Error|error" $O/torch_moe.log | cut -c1-170
python3 -c "
import json; d=json.load(open('$O/torch_moe.json'))
for r in d['rows']: print(r['shape'], {k: v for k, v in r.items() if 'rel_rms' in k or 'unavailable' in k})"
cd $O && tar czf ../call9.tgz * && cd .. && rm -rf c9
