#!/usr/bin/env bash
# s63 call 6 (any one GPU): after the review mend (the probe's shared map encoder, ByteStream's one variant check):
# the unfused / stream GPU tests and the probe's rows that build maps through the changed helpers.
# Carry build/s63m.tar.xz (test_unfused_gpu, mainloop_probe; stripped).
#   OUT=$OUT bash results/moe/runs/s63/call6.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk63m && mkdir -p $B && tar xJf build/s63m.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c6 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 120 $B/test_unfused_gpu > $O/test_unfused_gpu.log 2>&1
echo "test_unfused_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_unfused_gpu.log | tr '\n' ' ')"
timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas 132 --kblocks 1024 > $O/probe.log 2>&1
echo "probe rc=$?"; grep -E "^(l1-tma-mix|l1-tma1-mix|short-tma-k|short-tma3-k) " $O/probe.log
