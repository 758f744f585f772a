#!/usr/bin/env bash
# s66 call 3: the runs planned as calls 1 and 2, in one script and one carry (theirs together were over the limit).
#  1. On an H200: session 64's unrun probe rows (l1-bulkaw-mix / short-bulkaw-k beside l1-tma-mix, l1-bulkw-mix,
#     short-tma-k, ...) on 132, 66 and 33 CTAs, one process each.
#  2. Any card: the MoE layer GPU tests with the host code under ASan + UBSan (session 65's unrun call 2).
#  3. With the time left: the tensor maps' L2 promotion (bench_moe_p, l2-promo.patch) in processes 3 2 2 3
#     (256 B, 128 B, 128 B, 256 B) on the W8A8 8K V4 layers, Interleaved; the fused kernel's median per process.
# Carry build/s66c.tar.xz (mainloop_probe and bench_moe_p (main de518b6 + l2-promo.patch: XSTAGE_DEBUG_L2_PROMO = 2 128 B, 3 256 B), test_moe_layer_gpu of build-asan as
# test_moe_layer_gpu_asan with libasan.so.8 / libubsan.so.1; stripped).
#   OUT=$OUT bash results/moe/runs/s66/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk66c && mkdir -p $B && tar xJf build/s66c.tar.xz -C $B
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
if grep -q H200 $O/gpu.txt; then
  for c in 132 66 33; do
    timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe$c.json > $O/probe$c.log 2>&1
    el "probe $c CTAs: rc=$?"
    grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-bulkaw-mix|l1-tma-mix-b|short-tma-k|short-bulkw-k|short-bulkaw-k|short-tma-k-b) " $O/probe$c.log
  done
fi
# The CUDA driver maps memory in ASan's shadow gap (protect_shadow_gap=0); leaks are reported at exit.
LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}" ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1" \
  UBSAN_OPTIONS=print_stacktrace=1 timeout 300 $B/test_moe_layer_gpu_asan > $O/test_moe_layer_gpu_asan.log 2>&1
el "asan test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/test_moe_layer_gpu_asan.log | tr '\n' ' ') sanitizer lines: $(grep -cE 'Sanitizer|runtime error' $O/test_moe_layer_gpu_asan.log)"
grep -E "^\[  FAILED|ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" $O/test_moe_layer_gpu_asan.log | head -8
i=0
for v in 3 2 2 3; do
  i=$((i + 1))
  left=$(( 570 - ($(date +%s) - T0) ))
  [ $left -gt 45 ] || { el "$i promo $v skipped"; continue; }
  XSTAGE_DEBUG_L2_PROMO=$v timeout $left $B/bench_moe_p --out $O/p$i-v$v --shapes deepseek-v4-pro,deepseek-v4-flash \
    --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 \
    --warmup-s 0.03 > $O/p$i-v$v.log 2>&1
  el "$i promo $v rc=$? $(grep -c 'DEBUG: tensor maps' $O/p$i-v$v.log) debug line(s)"
done
python3 - $O <<'PY'
import json, sys, glob, os, statistics as st
o = sys.argv[1]; res = {}
for d in sorted(glob.glob(o + "/p*-v*")):
    if not os.path.isdir(d) or not os.path.exists(d + "/summary.json"): continue
    v = d.rsplit("-v", 1)[1]
    for r in json.load(open(d + "/summary.json"))["rows"]:
        k = (r["shape"], r["tokens"], r["routing"])
        res.setdefault(k, {}).setdefault(v, []).append(r["ms_fused_interleaved"])
print("shape tokens routing | fused ms, L2 promotion 256 B (procs 1, 4) | 128 B (procs 2, 3) | 128/256 of the means")
for k, v in sorted(res.items()):
    a, b = v.get("3", []), v.get("2", [])
    r = st.mean(b) / st.mean(a) if a and b else float("nan")
    print(*k, "|", " ".join(f"{x:.3f}" for x in a), "|", " ".join(f"{x:.3f}" for x in b), "|", f"{r:.3f}")
PY
cd $O && rm -f */blocks.json && tar czf ../c3.tgz . && cd .. && rm -rf $O
