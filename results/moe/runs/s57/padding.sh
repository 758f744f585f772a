#!/usr/bin/env bash
# Prepared in session 57 (no device lent then); run as `OUT=$OUT STEPS=... bash results/moe/runs/s57/padding.sh` with
# carry build/s57pad.tar.xz (build-padding.sh). What an expert's last row tile's padding rows hold, which reaches the
# tensor cores and no result (moe::loaded_padding_rows; docs/MOE-NOTEBOOK.md "Session 57"):
#   STEPS=tests  test_moe_layer_gpu (every test; the new PaddingRowsReachNoResult and PaddingRowsEmulatedRanks: stale
#                rows reach no result, and zero_padding zeroes exactly the loaded padding rows; CapturedCallsReplay with
#                it), then compute-sanitizer memcheck on PaddingRowsEmulatedRanks
#   STEPS=power  mainloop_probe --power 1 in two processes: the W8A8 l1 and half-wide blocks on shared-memory operands
#                with A random, zero, 0xFF, 20 % zero / 0xFF rows (a full tile's padding) and one random row (a one-token
#                expert's half tile), ABBA blocks of 1 s on every SM, NVML's clock, power and joules per launch: how much
#                the tensor cores' power, and so the clock at 700 W, depends on what A holds
#   STEPS=bench  bench_moe --compare-padding in two processes: beside the default (padding rows 0xFF after the
#                harness's poison, what the table of record timed), _pn (0xFF on a workspace of its own: the control),
#                _ps (random finite values: an earlier call's rows, what a padding row holds in use) and _pz (the same
#                with zero_padding 1, the prologue's zeroing included). W8A8 at 8K: V4-Pro, V4-Flash, DeepSeek-V3
#                (both routings), DiT-MoE-XL (lagged waves, auto's order); W4A8 V4-Pro 8K; W8A8 V4-Pro 32K balanced.
#                Per backend the run's moe.csv also has NVML's mean SM clock (joules per call only where a block
#                spans two steps of the energy counter, tens of ms apart: at these 50 ms blocks often null).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk57 && tar xJf build/s57pad.tar.xz -C build/pk57
source scripts/moe-env.sh
O=$OUT/pad && mkdir -p $O
STEPS=${STEPS:-"tests power bench"}
T0=$(date +%s)  # a call may run 600 s: the second bench process is skipped past 420 s (its rows are the ABBA repeat)
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
if [[ " $STEPS " == *" tests "* ]]; then
  timeout 300 build/pk57/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
  echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|padding rows zeroed" $O/test_moe_layer_gpu.log | head -20
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  timeout 200 $CS --tool memcheck --error-exitcode 9 build/pk57/test_moe_layer_gpu \
    --gtest_filter='MoeLayerGpu.PaddingRowsEmulatedRanks' > $O/memcheck.log 2>&1
  echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tail -1)"
fi
if [[ " $STEPS " == *" power "* ]]; then
  for i in 1 2; do
    timeout 150 build/pk57/mainloop_probe --power 1 --json $O/power_$i.json > $O/power_$i.log 2>&1
    echo "power process $i rc=$?"; cat $O/power_$i.log
  done
fi
if [[ " $STEPS " == *" bench "* ]]; then
  for i in 1 2; do
    if [ $i = 2 ] && [ $(( $(date +%s) - T0 )) -gt 420 ]; then echo "bench process 2 skipped at $(( $(date +%s) - T0 )) s"; break; fi
    for c in "w8a8 8192 deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 balanced,skewed interleaved 0" \
             "w8a8 8192 dit-moe-xl balanced,skewed wave 1" \
             "w4a8 8192 deepseek-v4-pro balanced,skewed interleaved 0" \
             "w8a8 32768 deepseek-v4-pro balanced interleaved 0"; do
      set -- $c
      if [ $(( $(date +%s) - T0 )) -gt 480 ]; then echo "process $i $1 $2 $3 skipped at $(( $(date +%s) - T0 )) s"; continue; fi
      d=$O/p$i-$1-$2-${3%%,*}
      left=$(( 590 - ($(date +%s) - T0) ))  # what the call has left, so a slow process ends inside it
      timeout $(( left < 200 ? left : 200 )) build/pk57/bench_moe --out $d --shapes $3 --tokens $2 --routing $4 --precision $1 --orders $5 \
        --wave-lag $6 --worlds 1 --check-tokens 1 --compare-padding --block-s 0.05 --warmup-s 0.03 > $d.log 2>&1
      echo "process $i $c rc=$?"
      [ -f $d/moe.csv ] || { tail -n 3 $d.log; continue; }
      for s in _pn _ps _pz; do python3 scripts/moe-variant-ratio.py $d/moe.csv $s; done
      awk -F, 'NR==1{for(i=1;i<=NF;i++) h[$i]=i; next} $h["backend"] ~ /fused/ {printf "  %-18s %-8s %-22s clock %s MHz  J/call %s\n",
        $h["shape"], $h["routing"], $h["backend"], $h["sm_clock_mhz"], $h["j_per_call"]}' $d/moe.csv
    done
  done
fi
