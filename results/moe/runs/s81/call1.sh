#!/usr/bin/env bash
# s81 call 1 (any sm_90 GPU). Carry build/s81a.tar.xz (every GPU test binary and libxstage_attention.so of 8047fdc,
# scripts/gpu-tests-device.sh pack).
#   OUT=$OUT bash results/moe/runs/s81/call1.sh
# What changed on the GPU side: the timeout rule (runtime::require_timeout) of Team::emulated, the communicator and
# xstage_team_create; the Ulysses layer's input check (one check_inputs, called by forward and pre_a2a). Kernels
# unchanged. So: every GPU test and Python GPU test (session 80's unrun MoE quantization-error test among them) and
# a memcheck of the Ulysses refused-call test.
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c1 && mkdir -p "$O/w"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s81a.tar.xz
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 200 $CS --tool memcheck --error-exitcode 9 build/tests/ulysses/test_ulysses_gpu \
  --gtest_filter='UlyssesEmulated.RefusedCallKeepsTheOutputBuffers' > $O/w/memcheck_ulysses.txt 2>&1
echo "== memcheck ulysses refused call rc=$? $(grep -E 'ERROR SUMMARY' $O/w/memcheck_ulysses.txt)"
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../c1.tgz ./* 2>/dev/null); rm -rf $O/w
