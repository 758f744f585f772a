#!/usr/bin/env bash
# s82 call 2 (any sm_90 GPU): this session's benchmark changes, end to end.
#   1. the torch harnesses' one AgreedTimer (bench_protocol.AgreedTimer + torch_dist_agree) under torchrun with one
#      real rank: torch_baseline.py (Ulysses, xstage vs cuDNN SDPA) and torch_moe_ep.py (MoE, xstage vs torch);
#   2. the C++ AgreedTimer on a real communicator (xstage launch -n 1): bench_moe (its new default protocol) and
#      bench_ulysses, one small configuration each;
#   3. the probes' balanced passes: stream_probe and mainloop_probe, short forms.
# Carry build/s82c.tar.xz (bench_moe, bench_ulysses, stream_probe, mainloop_probe, libxstage_attention.so, xstage
# of the commit that made them).
#   OUT=$OUT bash results/moe/runs/s82/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c2 && mkdir -p "$O"
{
nvidia-smi -L
B=$(mktemp -d) && tar xJf build/s82c.tar.xz -C $B || exit 1
source scripts/moe-env.sh
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-} XSTAGE_ATTENTION_LIB=$B/libxstage_attention.so PYTHONPATH=python
export PYTHONDONTWRITEBYTECODE=1
python3 -c "import torch; print('torch', torch.__version__)"
timeout 120 torchrun --nproc-per-node 1 bench/ulysses/torch_baseline.py --seq 8K --heads-per-rank 3 --block-s 0.1 \
  --warmup-s 0.05 --rounds 1 --out $O/tb > $O/torch_baseline.txt 2>&1
echo "== torch_baseline (torchrun 1) rc=$?"; tail -4 $O/torch_baseline.txt
timeout 150 torchrun --nproc-per-node 1 bench/moe/torch_moe_ep.py --shapes dit-moe-xl --tokens 2048 --sets 2 \
  --block 0.1 --warmup-s 0.05 --rounds 1 --json $O/torch_moe_ep.json > $O/torch_moe_ep.txt 2>&1
echo "== torch_moe_ep (torchrun 1) rc=$?"; tail -6 $O/torch_moe_ep.txt
timeout 150 $B/xstage launch -n 1 --timeout 140 -- $B/bench_moe --shapes dit-moe-xl --tokens 2048 --routing balanced \
  --precision w8a8 --orders wave --no-stream --out $O/bm > $O/bench_moe.txt 2>&1
echo "== bench_moe (xstage launch -n 1, default protocol) rc=$?"; tail -3 $O/bench_moe.txt
timeout 100 $B/xstage launch -n 1 --timeout 90 -- $B/bench_ulysses --seq 8K --heads-per-rank 3 --block-s 0.1 \
  --warmup-s 0.05 --rounds 1 --out $O/bu > $O/bench_ulysses.txt 2>&1
echo "== bench_ulysses (xstage launch -n 1) rc=$?"; tail -4 $O/bench_ulysses.txt
timeout 120 $B/stream_probe --gb 4 --reps 1 --rounds 1 --csv $O/stream.csv > $O/stream_probe.txt 2>&1
echo "== stream_probe rc=$?"; head -8 $O/stream_probe.txt
timeout 120 $B/mainloop_probe --kblocks 512 --reps 2 --rounds 1 --json $O/mainloop.json > $O/mainloop_probe.txt 2>&1
echo "== mainloop_probe rc=$?"; head -12 $O/mainloop_probe.txt
rm -f $O/bm/blocks.json $O/bu/blocks.json
} 2>&1 | tee $O/out.txt
