#!/usr/bin/env bash
# Prepared in session 56 (no device lent then); run as `OUT=$OUT STEPS=... bash results/moe/runs/s56/ffma-yield.sh` with
# carry build/s56fy.tar.xz (build-ffma-yield.sh). The W8A8 promotion's FFMA runs made yieldable by the post-build pass
# scripts/sass-ffma-yield.py (CMake XSTAGE_MOE_FFMA_YIELD): O = main, Y = the first 9/16 of each run, Z = all of it.
# VARIANTS (default "o z") picks the bench_moe builds of the ab steps.
#   STEPS=tests  the MoE layer GPU tests on Z (the pass changes no arithmetic: every test must pass as on main), and the
#                mainloop probe O Z Z O (smem rows: the promotion beside the other warpgroup's batch with nothing else
#                running; pipe rows from HBM, 132 CTAs: with the producer and the data waits)
#   STEPS=ab8k   bench_moe in processes O Z Z O (scripts/moe-ab.sh; VARIANTS="o y z" for O Y Z Z Y O, ~1.5x the
#                time), W8A8 8K V4-Pro and V4-Flash (the bar's layers), both routings, Interleaved, traced: fused/unfused
#                per process and the traced L1 / L2 mainloop FLOP per cycle per SM (per cycle: the clock drops out).
#                s52 ran eight such processes of these four layers in one call: ~75 s each untraced
#   STEPS=ab32k  the same at 32K on V4-Pro, DeepSeek-V3 and Qwen3-235B, balanced (compute-bound tiles: where the
#                promotion's overlap with the tensor work shows most)
#   STEPS=dit    the same on DiT-MoE-XL (the project's own model) at 2K and 8K, lagged Expert-Wave (auto's order there),
#                whose 9-block Linear-1 tiles took ~2.1k cycles per K block against 1.0k of tensor work (s55)
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s56fy.tar.xz -C build/pk
source scripts/moe-env.sh
O=$OUT/fy && mkdir -p $O
STEPS=${STEPS:-"tests ab8k"}
if [[ " $STEPS " == *" tests "* ]]; then
  timeout 300 build/pk/test_moe_layer_gpu_z > $O/test_moe_layer_gpu_z.log 2>&1
  echo "test_moe_layer_gpu (Z) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu_z.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu_z.log | head
  i=0
  for v in o z z o; do
    i=$((i+1))
    timeout 60 build/pk/mainloop_probe_$v --json $O/probe_smem_${i}_$v.json > $O/probe_smem_${i}_$v.log 2>&1
    echo "probe smem $i $v rc=$?"; grep -E "^ *(l1|l2|half)" $O/probe_smem_${i}_$v.log | head -12
    timeout 60 build/pk/mainloop_probe_$v --pipe-only --src-mb 16384 --json $O/probe_pipe_${i}_$v.json \
      > $O/probe_pipe_${i}_$v.log 2>&1
    echo "probe pipe $i $v rc=$?"; grep -E "^ *(l1|l2)" $O/probe_pipe_${i}_$v.log | head -8
  done
fi
ab() {  # $1: out folder, rest: bench_moe arguments
  local d=$1; shift
  local bins=""
  for v in ${VARIANTS:-o z}; do bins="$bins build/pk/bench_moe_$v"; done
  BINS="${bins# }" OUT=$d bash scripts/moe-ab.sh "$@" 2>&1 | tail -n 40
}
if [[ " $STEPS " == *" ab8k "* ]]; then
  ab $O/ab8k --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --routing balanced,skewed \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --trace --block-s 0.04 --warmup-s 0.02
fi
if [[ " $STEPS " == *" dit "* ]]; then
  ab $O/dit --shapes dit-moe-xl --tokens 2048,8192 --routing balanced,skewed --precision w8a8 --orders wave --wave-lag 1 \
    --worlds 1 --check-tokens 1 --trace --block-s 0.04 --warmup-s 0.02
fi
if [[ " $STEPS " == *" ab32k "* ]]; then
  ab $O/ab32k --shapes deepseek-v4-pro,deepseek-v3,qwen3-235b-a22b --tokens 32768 --routing balanced \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --trace --block-s 0.04 --warmup-s 0.02
fi
