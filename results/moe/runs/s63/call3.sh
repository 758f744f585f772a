#!/usr/bin/env bash
# s63 call 3 (nvidia-h200): branch s63-half3d (a half_wide tile's gate and up halves by one 3-d TMA load per
# warpgroup instead of two 2-d loads: tma_w1gu_h) against main. Its MoE layer GPU tests (half tiles in every format,
# order, P = 1 and emulated P = 2, 4, 8), then main's bench_moe (O) and the branch's (N) in processes O N N O on the
# W8A8 layers where half tiles carry the most time (V4-Pro, V4-Flash, DeepSeek-V3 at 2048 and 8192 tokens, both
# routings, Interleaved), comparing the fused kernel's median per process.
# First the mainloop probe's short-tma3-k (the same load form in the probe) on 132 / 66 / 33 CTAs. ANY_CARD=1 runs on
# any card (else it exits 3 on one that is not an H200). Carry build/s63.tar.xz (main's binaries) and
# build/s63b.tar.xz (the branch's).
#   OUT=$OUT bash results/moe/runs/s63/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.."
B=build/pk63 && mkdir -p $B && tar xJf build/s63.tar.xz -C $B && tar xJf build/s63b.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
[ "${ANY_CARD:-0}" = 1 ] || grep -q H200 $O/gpu.txt || { echo "not an H200: stop"; exit 3; }
for c in 132 66 33; do
  timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe$c.json > $O/probe$c.log 2>&1
  el "probe $c CTAs rc=$?"
  grep -E "^(variant|l1-tma-mix|l1-tma1-mix|short-tma-k|short-tma3-k|short-tma-k-b) " $O/probe$c.log
done
timeout 200 $B/test_moe_layer_gpu_b > $O/test_moe_layer_gpu_b.log 2>&1
el "test_moe_layer_gpu (branch) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu_b.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu_b.log | head
i=0
for b in bench_moe bench_moe_b bench_moe_b bench_moe; do
  i=$((i + 1))
  left=$(( 585 - ($(date +%s) - T0) ))
  [ $left -gt 30 ] || { el "$i $b skipped"; continue; }
  timeout $left $B/$b --out $O/p$i-$b --shapes deepseek-v4-pro,deepseek-v4-flash,deepseek-v3 --tokens 2048,8192 \
    --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03 \
    > $O/p$i-$b.log 2>&1
  el "$i $b rc=$?"
done
python3 - $O <<'PY'
# The fused kernel's own median per process (the ceiling GEMM's time also moves between processes: call 3's first
# version compared ceiling fractions, which carried the ceiling's 5.10-5.54 ms on V4-Pro balanced into the ratio).
import json, sys, glob, os, statistics as st
o = sys.argv[1]; res = {}
for d in sorted(glob.glob(o + "/p*-bench_moe*")):
    if not os.path.isdir(d) or not os.path.exists(d + "/summary.json"): continue
    b = "N" if d.endswith("_b") else "O"
    for r in json.load(open(d + "/summary.json"))["rows"]:
        k = (r["shape"], r["tokens"], r["routing"])
        res.setdefault(k, {"O": [], "N": []})[b].append(r["ms_fused_interleaved"])
print("shape tokens routing | fused ms O (procs 1, 4) | N (procs 2, 3) | N/O of the means")
for k, v in sorted(res.items()):
    if v["O"] and v["N"]:
        print(*k, "|", " ".join(f"{x:.3f}" for x in v["O"]), "|", " ".join(f"{x:.3f}" for x in v["N"]), "|",
              f"{st.mean(v['N']) / st.mean(v['O']):.3f}")
PY
cd $O && rm -f */blocks.json && tar czf ../c3.tgz . && cd .. && rm -rf $O
