#!/usr/bin/env bash
# s50 call 13 (nvidia-h200): torch_moe.py --order auto (the order MoeLayer.auto_order resolves to, recorded in the
# JSON) on two shapes, short blocks. build/s50c12.tar.xz as call 12.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/src/kernels/attention && tar xJf build/s50c12.tar.xz -C /tmp && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c13 && mkdir -p $O
timeout 150 python3 bench/moe/torch_moe.py --shapes qwen3-30b-a3b,dit-moe-xl --tokens 8192 --order auto \
  --backends xstage,torch-bf16 --block 0.3 --warmup 0.2 --json $O/torch_moe_auto.json > $O/torch_moe_auto.log 2>&1
echo "torch_moe auto rc=$?"; grep -E "^==|relative|xstage |torch-bf16 " $O/torch_moe_auto.log | cut -c1-150
python3 -c "
import json; d=json.load(open('$O/torch_moe_auto.json'))
for r in d['rows']: print(r['shape'], r['order_requested'], '->', r['order'], r['xstage_correct'])"
cd $O && tar czf ../call13.tgz * && cd .. && rm -rf c13
