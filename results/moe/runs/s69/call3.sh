#!/usr/bin/env bash
# s69 call 3: is the packed kernel's loss on compute-bound layers its register split? The packed kernel at 72 / 216
# producer / consumer registers (s68's build, bench_moe of build/s68e.tar.xz) against the same code at main's 56 / 224
# (bench_moe_r56: ConfigT::kPackedProducerRegs 56, kPackedConsumerRegs 224; ptxas: 4-8 B spill stores, 12-28 B loads),
# each process timing packed beside row-major (--compare-packed), processes A B B A A B B A, 8192 tokens, W8A8,
# Interleaved, DiT-MoE-XL, Qwen3-235B and V4-Pro.
# Carry build/s69c.tar.xz (s68e's bench_moe and bench_moe_r56, stripped; not in git; r56: a one-line change of
# src/kernels/moe/moe_params.hpp on 43ab3cf).   OUT=$OUT bash results/moe/runs/s69/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk69c && mkdir -p $B && { [ -f $B/bench_moe_r56 ] || tar xJf build/s69c.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O/w
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
Q="--shapes dit-moe-xl,qwen3-235b-a22b,deepseek-v4-pro --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03 --compare-packed"
i=0
for b in bench_moe bench_moe_r56 bench_moe_r56 bench_moe bench_moe bench_moe_r56 bench_moe_r56 bench_moe; do
  i=$((i + 1))
  timeout 120 $B/$b $Q --out $O/w/p$i > $O/w/p$i.log 2>&1
  echo "== process $i $b: rc=$?"
  [ -f $O/w/p$i/moe.csv ] && grep -E "fused_interleaved" $O/w/p$i/moe.csv | cut -d, -f1,7,10,11,14,16,19
done
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz $(ls -d p*/moe.csv 2>/dev/null) *.log *.txt 2>/dev/null)
rm -rf $O/w
