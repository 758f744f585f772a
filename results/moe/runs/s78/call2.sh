#!/usr/bin/env bash
# s78 call 2 (any sm_90 card): every GPU test binary and the Python GPU tests of main 1e5f1a0 (GPU code as of dbf55de)
# on one GPU (the real-rank tests skip below two GPUs); memcheck on two MoE layer tests. build/s78a.tar.xz: the eight
# GPU test binaries, libxstage_attention.so and xstage, stripped (`bash scripts/gpu-tests-device.sh pack`).
# The call ran these steps written out here (a copy of session 53's call8.sh; `git show d1c84ed:results/moe/runs/s78/call2.sh`);
# they are now scripts/gpu-tests-device.sh, which also packs the logs into one archive (the device returns few files).
#   OUT=$OUT bash results/moe/runs/s78/call2.sh
cd "$(dirname "$0")/../../../.." || exit 1
exec bash scripts/gpu-tests-device.sh run build/s78a.tar.xz
