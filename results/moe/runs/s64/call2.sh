#!/usr/bin/env bash
# s64 call 2 (nvidia-h200, the machine call 1 left warm): main's GPU tests on the H200 (session 63 ran them on an H100).
# Carry build/s64.tar.xz. What ran (the logs are in call2/):
#   OUT=$OUT bash results/moe/runs/s64/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk64 && mkdir -p $B && tar xJf build/s64.tar.xz -C $B && source scripts/moe-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for t in test_moe_layer_gpu test_unfused_gpu test_fp8_wgmma_gpu; do
  timeout 200 $B/$t > $OUT/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED" $OUT/$t.log | head
done
