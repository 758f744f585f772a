#!/usr/bin/env bash
# s63 call 1 (nvidia-h200): main 9adb0b1's kernel (its last host change, bench_moe's local rows from expert_counts,
# had not run on a GPU) plus this session's harness additions: the MoE GPU tests (emulated P = 2, 4, 8 among them),
# the unfused/stream tests (each stream form's pick time now exposed) and the FP8 wgmma tests; then the mainloop
# probe's new weight-load rows (one 256-row box, one 32 KB bulk copy of a pre-packed block) beside l1-tma-mix from
# HBM on 132 and 66 CTAs; then the V4 W8A8 8K points with the memory floor (every stream form's rate on the H200).
# Carry build/s63.tar.xz (bench_moe, mainloop_probe, three GPU test binaries; stripped).
#   OUT=$OUT bash results/moe/runs/s63/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk63 && mkdir -p $B && tar xJf build/s63.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for t in test_moe_layer_gpu test_unfused_gpu test_fp8_wgmma_gpu; do
  timeout 200 $B/$t > $O/$t.log 2>&1
  el "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $O/$t.log | head
done
grep -E "^byte stream" $O/test_unfused_gpu.log
for c in 132 66 33; do
  timeout 120 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe$c.json > $O/probe$c.log 2>&1
  el "probe $c CTAs rc=$?"
  grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tma-mix-b|l1-pipe|l1-tma|short-tma-k|short-bulkw-k|short-none) " $O/probe$c.log
done
timeout 200 $B/bench_moe --out $O/v4 --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --precision w8a8 \
  --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 > $O/v4.log 2>&1
el "bench_moe V4 8K rc=$?"
grep -E "deepseek" $O/v4.log | head
python3 - "$O/v4/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for r in s["rows"]:
    f = r.get("stream_forms_tbps", {})
    print(r.get("key", r.get("shape")), r.get("routing"), "ceiling", round(r.get("ceiling_fraction", 0), 3),
          "bound", round(r.get("bound_fraction", 0), 3), r.get("stream_variant"), round(r.get("stream_tbps", 0), 2),
          {k: round(v, 2) for k, v in f.items()})
PY
cd $O && rm -f */blocks.json && tar czf ../c1.tgz . && cd .. && rm -rf $O
