#!/usr/bin/env bash
# Diagnosis runs for the fused MoE kernel's 32768-token gap (issue 11; docs/MOE.md, "Next experiments"), one device
# call from a carried build. Steps (STEPS, space-separated, default all):
#   trace  the traced kernel (per-tile mainloop rates) on DeepSeek-V3 at 32768 tokens and on the same layer with
#          1 expert (top-1: its weights, 44 MB, stay in the 60 MB L2) and with 8 experts (top-8): locality against
#          the kernel's code path
#   time   the untraced layers above timed against the unfused path and the cuBLASLt ceiling (short blocks)
#   ncu    DRAM bytes and the L2 hit rate of one fused launch per order (ncu, clocks locked by ncu)
#   ktime  the duration of the fused kernel and of the weighted sum beside the unfused path's weighted sum (ncu
#          gpu__time_duration of their first launches; DIAG_NCU_SHAPES, the first order of DIAG_NCU_ORDERS, interleaved
#          when it is unset; DIAG_KT_REGEX and DIAG_KT_COUNT widen it, e.g. to the W4A8 pre-pass: "moe_fused|combine|int4")
# DIAG_SHAPES replaces the trace and time steps' shapes, DIAG_ARGS adds bench_moe arguments to every step.
# Writes under $OUT: one folder per run (the harness's files), ncu-*.txt and ktime.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/moe-env.sh
OUT=${OUT:-results/moe/diag}
mkdir -p "$OUT"
BUILD=${XSTAGE_BUILD_DIR:-build}
B="$BUILD/bench/moe/bench_moe"
STEPS=${STEPS:-trace time ncu ktime}
SHAPES=${DIAG_SHAPES:---shapes deepseek-v3 --custom v3e1:7168:2048:1:1 --custom v3e8:7168:2048:8:8}
COMMON="--tokens 32768 --routing balanced --precision w8a8 --check-tokens 1 ${DIAG_ARGS:-}"
for s in $STEPS; do
  case $s in
    trace)
      echo "== trace"
      timeout 300 $B --out "$OUT/trace" $SHAPES $COMMON --orders wave,interleaved --trace --no-time 2>&1 | tail -8
      [ -f "$OUT/trace/trace_summary.csv" ] && cut -d, -f1,5,8-14 "$OUT/trace/trace_summary.csv" | column -t -s,
      ;;
    time)
      echo "== time"
      timeout 300 $B --out "$OUT/time" $SHAPES $COMMON --orders wave,interleaved --block-s 0.1 --warmup-s 0.1 --rounds 1 2>&1 | tail -8
      ;;
    ncu)
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      for o in ${DIAG_NCU_ORDERS:-wave interleaved}; do
        echo "== ncu $o"
        timeout 200 "$NCU" -k regex:moe_fused_kernel -c 1 \
          --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
          $B --out "$OUT/ncu-$o" ${DIAG_NCU_SHAPES:---shapes deepseek-v3} $COMMON --orders "$o" --no-time \
          > "$OUT/ncu-$o.txt" 2>&1
        grep -E "dram__|lts__|gpu__time" "$OUT/ncu-$o.txt"
      done
      ;;
    ktime)
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      o=$(echo ${DIAG_NCU_ORDERS:-interleaved} | cut -d' ' -f1)
      echo "== ktime $o"
      timeout 200 "$NCU" -k "regex:${DIAG_KT_REGEX:-moe_fused_kernel|combine_kernel}" -c ${DIAG_KT_COUNT:-4} \
        --metrics gpu__time_duration.sum \
        $B --out "$OUT/ktime" ${DIAG_NCU_SHAPES:---shapes deepseek-v3} $COMMON --orders "$o" --worlds 1 --no-time \
        > "$OUT/ktime.txt" 2>&1
      grep -E "${DIAG_KT_REGEX:-moe_fused_kernel|combine_kernel}|gpu__time" "$OUT/ktime.txt" | sed 's/(moe_kernel::KernelParams.*//'
      ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
