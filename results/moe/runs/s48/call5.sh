#!/usr/bin/env bash
# s48 call 5 (nvidia-h200-x2): the MoE studies with real ranks, EP = 2, and W4A8 quarter tiles on GPU 0.
#   build/s48c3.tar.xz (N: 8e1fdc9 + W4A8 quarter tiles + the P = 1 twin skipped where the global batch does not fit
#   32-bit TMA coordinates; Q0: N's sources with -DXSTAGE_MOE_INT4_QUARTER=0).
#   1. scripts/moe-study.sh with RANKS=2: steps w8 w4 dsweep tiles (the 84-point grid at EP = 2 with the trace, the
#      lead sweep, every traced tile of two configurations; merged on the CPU machine);
#   2. compute-sanitizer memcheck, racecheck, synccheck on N's W4A8 tests with quarter tiles (GPU 0);
#   3. W4A8 V4-Pro, V4-Flash, Qwen3-30B at 2048 (both routings) and 8192 (balanced), P = 1, processes Q0 N N Q0.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
TESTS=0 SANITY=0 STUDY_STEPS="${STUDY_STEPS:-w8 w4 dsweep tiles}" bash results/moe/runs/s48/call4.sh
# (call4.sh unpacked the binaries and tarred its outputs into $OUT/call4.tgz)
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el sanitizers
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in memcheck racecheck synccheck; do
  CUDA_VISIBLE_DEVICES=0 timeout 150 $SAN --tool $tool --error-exitcode 3 build/tests/moe_gpu/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.W4A8SingleRank:MoeLayerGpu.W4A8EmptyExpertsAndRepeatedCalls' >> $OUT/sanitize.log 2>&1
  echo "$tool exit $?"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK" $OUT/sanitize.log | head
el W4A8
i=0
for x in Q0 N N Q0; do
  i=$((i + 1))
  for t in 2048 8192; do
    r=balanced,skewed; [ $t = 8192 ] && r=balanced
    CUDA_VISIBLE_DEVICES=0 timeout 75 build/bench/moe/bench_moe_$x --out $OUT/w$x-$i-$t --shapes deepseek-v4-pro,deepseek-v4-flash,qwen3-30b-a3b \
      --tokens $t --routing $r --precision w4a8 --orders interleaved --worlds 1 --check-tokens 2 \
      --block-s 0.05 --warmup-s 0.03 > $OUT/w$x-$i-$t.log 2>&1
    echo "$x-$i $t rc=$? $(grep -E '^[a-z]' $OUT/w$x-$i-$t.log | grep -E ' (2048|8192) ' | awk '{print substr($1,1,14), substr($3,1,4), $5, $NF}' | tr '\n' ' ')"
  done
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz --exclude=call4.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz ! -name call4.tgz -exec rm -rf {} +
