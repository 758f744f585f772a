#!/usr/bin/env bash
# s48 call 2 (nvidia-h200-x2): call 1 again after the fix (MoeWorkspace::poison is collective in a real team: a
# faster peer's dispatch had landed before the poison, and poisoned (source, token, slot) entries sent combine
# stores to wild addresses), with bench_moe's new P = 1 twin check (each rank's rows against its slice of the whole
# global batch run at P = 1 on its GPU, bit for bit). Steps as in call 1; STUDY_STEPS picks the study's steps.
#   1. a small correctness run (Qwen3-30B, V4-Flash, 2048 tokens per rank, W8A8 and W4A8, both orders, 4 checked
#      tokens per rank against the host reference, every token against UnfusedEpMoe);
#   2. compute-sanitizer memcheck on both ranks of a small layer (custom 512/256/16/4, 256 tokens per rank);
#   3. scripts/moe-study.sh with RANKS=2, steps w8 and w4 (the 84-point grid at EP = 2; merged on the CPU machine).
# build/s48c2.tar.xz: this build's stripped bench_moe and xstage CLI.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/src/cli && tar xJf build/s48c2.tar.xz -C /tmp
mv /tmp/bench_moe build/bench/moe/ && mv /tmp/xstage build/src/cli/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L; nvidia-smi topo -m | tee $OUT/topo.txt
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
X=build/src/cli/xstage; B=build/bench/moe/bench_moe
el sanity
$X launch -n 2 --timeout 120 -- $B --out $OUT/sanity --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 2048 \
  --precision w8a8,w4a8 --orders wave,interleaved --check-tokens 4 --no-time > $OUT/sanity.log 2>&1
echo "sanity rc=$?"; grep -vE "^\s+(trace|emulated)" $OUT/sanity.log | head -30
el memcheck
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
$X launch -n 2 --timeout 150 -- $SAN --tool memcheck --error-exitcode 3 $B --out $OUT/san --custom tiny:512:256:16:4 \
  --tokens 256 --precision w8a8,w4a8 --orders wave,interleaved --check-tokens 2 --no-time > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|tiny|real ranks" $OUT/memcheck.log | head -12; echo "device access errors: $(grep -cE "Invalid (__global__|__shared__|__local__)|out of bounds|misaligned" $OUT/memcheck.log)"
for st in ${STUDY_STEPS:-w8}; do
  el "$st"
  OUT=$OUT/study RANKS=2 LAUNCH_TIMEOUT=${STEP_TIMEOUT:-300} STEPS=$st bash scripts/moe-study.sh >> $OUT/study.log 2>&1
  echo "$st rc=$?"
done
grep -E "^configs|^orders|^simulator|^# " $OUT/study.log
el done
cd $OUT && rm -f */blocks.json study/*/blocks.json && tar czf call2.tgz --exclude=call2.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +
