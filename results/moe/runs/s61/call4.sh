#!/usr/bin/env bash
# s61 call 4: bench_moe after the add_backend mend (58d6b80): the variant backends still build, check and time
# (DiT-MoE-XL and V4-Flash W8A8 2048 tokens, both orders, the control, every Linear-1 tile first, two prefetch
# backends). Carry build/s61m.tar.xz (bench_moe).
#   OUT=$OUT bash results/moe/runs/s61/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/bench/moe && tar xJf build/s61m.tar.xz -C build/pk && cp build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
timeout 100 build/bench/moe/bench_moe --out $O/r --shapes dit-moe-xl,deepseek-v4-flash --tokens 2048 --routing skewed \
  --precision w8a8 --orders wave,interleaved --worlds 1 --check-tokens 1 --compare-control --compare-l1-first \
  --prefetch 2 --block-s 0.02 --warmup-s 0.01 > $O/r.log 2>&1
echo "rc=$?"; grep -E "^configs" $O/r.log
python3 -c "import json; s=json.load(open('$O/r/summary.json')); [print(r['shape'], r['variants_bitwise_equal'], r['correct'], sorted(k[3:] for k in r if k.startswith('ms_'))) for r in s['rows']]"
cd $O && rm -f r/blocks.json && tar czf ../c4.tgz . && cd .. && rm -rf $O
