#!/usr/bin/env bash
# The MoE studies of issues 11/12 (P = 1) and 14/15 (real ranks) in one command, from a build carried to the
# GPU host: the fused-vs-unfused grid (7 shapes x {W8A8, W4A8} x 2 routings x 3 token counts) with both tile
# orders, Expert-Wave with lagged waves beside them (auto may pick it at P = 1) and the per-tile trace (W8A8), the lead
# sweep on three configurations, then the merge into the
# summaries, tables and plots.
#   RANKS=2 OUT=/root/out bash scripts/moe-study.sh        # real ranks (xstage launch -n 2), EP = 2
#   (LAUNCH_TIMEOUT=S: the launcher stops every rank of a step after S seconds)
#   OUT=/root/out bash scripts/moe-study.sh                # P = 1 (and emulated P = 2, 4, 8 bit-identity)
#   STEPS="w8 w4 dsweep tiles merge" selects steps (at P = 1 on one H200 each of w8, w4 took about a minute, 2026-12-01;
#   the device tool brings back at most 8 files per call: tar the folders or drop blocks.json).
#   Step emu (not in the default list): correctness only (--no-time), both precisions and orders, emulated P = 2, 4, 8
#   bit-identity at 8192 and at 32768 global tokens as well (the default steps check it at 2048); $OUT/emu8192,
#   $OUT/emu32768 (EMU_TOKENS picks the counts).
#   Steps big8, big4 (not in the default list): the 32768-token configurations again with longer blocks, a real
#   warm-up and two rounds ($BIGPROTO), for points where a 30 ms layer otherwise gets 3 calls per block; about
#   2.5 min each at P = 1 (estimate: 14 configurations x 4 backends x 4 blocks x 0.6 s + checks). merge then also
#   writes $OUT/moe-big, $OUT/moe-schedule-big.
# Writes $OUT/{w8,w4,dsweep,tiles}/ (bench_moe's files; tiles/tiles.csv the traced tiles) and the merged summaries in
# $OUT/moe, $OUT/moe-schedule (commit them as results/moe/pN and results/moe-schedule/pN, N the ranks).
# Variables: OUT (results/moe/study), RANKS, LAUNCH_TIMEOUT, STEPS, EXTRA (more bench_moe arguments for the w8, w4,
# big and emu steps), PROTO (the default steps' protocol: "--block-s 0.05 --warmup-s 0.03 --rounds 1",
# the table of record's; written out since bench_moe's own defaults became longer in session 82), BIGPROTO, EMU_TOKENS,
# EMUL_T (the emulated-rank check's global tokens at P = 1 runs, 2048), XSTAGE_BUILD_DIR (the carried build, build).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/moe-env.sh
BUILD=${XSTAGE_BUILD_DIR:-build}
OUT=${OUT:-results/moe/study}
RANKS=${RANKS:-}
STEPS=${STEPS:-w8 w4 dsweep tiles merge}
EXTRA=${EXTRA:-}  # more bench_moe arguments for the w8, w4, big and emu steps (e.g. --compare-single)
PROTO=${PROTO:---block-s 0.05 --warmup-s 0.03 --rounds 1}
BIGPROTO=${BIGPROTO:---block-s 0.3 --warmup-s 0.3 --rounds 2 --min-calls 5}
mkdir -p "$OUT"
bench() {  # bench DIR ARGS...: one bench_moe run, real ranks when RANKS is set
  local dir=$1; shift
  mkdir -p "$dir"
  if [ -n "$RANKS" ]; then
    "$BUILD/src/cli/xstage" launch -n "$RANKS" ${LAUNCH_TIMEOUT:+--timeout $LAUNCH_TIMEOUT} -- "$BUILD/bench/moe/bench_moe" --out "$dir" "$@"
  else
    "$BUILD/bench/moe/bench_moe" --out "$dir" --worlds 1,2,4,8 --emulated-tokens "${EMUL_T:-2048}" "$@"
  fi
}
for step in $STEPS; do
  case $step in
    w8) bench "$OUT/w8" --precision w8a8 --orders wave,interleaved --compare-wave-lag --compare-l1-first --check-tokens 1 --trace $PROTO $EXTRA ;;
    w4) bench "$OUT/w4" --precision w4a8 --orders wave,interleaved --compare-wave-lag --compare-l1-first --check-tokens 1 $PROTO $EXTRA ;;
    big8|big4) p=w8a8; [ "$step" = big4 ] && p=w4a8
          bench "$OUT/$step" --precision $p --tokens 32768 --orders wave,interleaved --check-tokens 1 --worlds 1 \
            $BIGPROTO $EXTRA ;;
    emu) for t in ${EMU_TOKENS:-8192 32768}; do
           EMUL_T=$t bench "$OUT/emu$t" --precision w8a8,w4a8 --tokens "$t" --orders wave,interleaved \
             --check-tokens 1 --no-time $EXTRA
         done ;;
    dsweep) bench "$OUT/dsweep" --shapes dit-moe-xl,qwen3-30b-a3b,deepseek-v4-flash --tokens 8192 \
              --orders wave,interleaved --leads 1,2,4,8,16,32,64 --check-tokens 1 $PROTO ;;
    tiles) mkdir -p "$OUT/tiles"  # every traced tile of two small configurations (the per-tile CSV, per rank)
           bench "$OUT/tiles" --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 2048 --routing skewed \
             --precision w8a8 --orders wave,interleaved --check-tokens 1 --trace-csv "$OUT/tiles/tiles.csv" $PROTO ;;
    merge) sw=""; [ -e "$OUT/dsweep/moe.csv" ] && sw="--dsweep $OUT/dsweep"
           [ -d "$OUT/tiles" ] && sw="$sw --tiles $OUT/tiles"
           python3 scripts/moe-summary.py --runs "$OUT/w8" "$OUT/w4" $sw --out-moe "$OUT/moe" \
             --out-schedule "$OUT/moe-schedule"
           big=""; for d in big8 big4; do [ -e "$OUT/$d/summary.json" ] && big="$big $OUT/$d"; done
           if [ -n "$big" ]; then python3 scripts/moe-summary.py --runs $big --out-moe "$OUT/moe-big" \
             --out-schedule "$OUT/moe-schedule-big"; fi ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
