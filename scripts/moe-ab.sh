#!/usr/bin/env bash
# A/B of bench_moe builds (kernel variants) in one device call, in balanced order: with BINS="A B C" the runs go
# A B C C B A, each its own process with its own unfused baseline, so every variant's fused/unfused ratio is a
# within-process ratio and the variants are compared through it (and through the traced mainloop rates, which
# are per cycle, so the clock drops out).
#   BINS="build/old/bench_moe build/bench/moe/bench_moe" OUT=/root/out bash scripts/moe-ab.sh ARGS...
# ARGS are bench_moe's (e.g. --shapes deepseek-v3 --tokens 32768 --routing balanced --precision w8a8
# --orders wave,interleaved --trace --worlds 1). Writes $OUT/ab/<run>_<variant>/ (bench_moe's files) and prints,
# per variant and backend, the median over its runs of unfused/fused and the traced L1/L2 FLOP per cycle per SM
# as a fraction of 8192 (sm_90's dense FP8 wgmma rate per SM and cycle, an architectural constant) ($OUT/ab/ab.csv).
# Exits 1 when any run failed (after the table).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/moe-env.sh
OUT=${OUT:-results/moe/ab}
read -r -a bins <<< "${BINS:?BINS: the bench_moe binaries to compare}"
order=("${bins[@]}")
for ((i = ${#bins[@]} - 1; i >= 0; --i)); do order+=("${bins[i]}"); done
mkdir -p "$OUT/ab"
run=0 failed=0
for b in "${order[@]}"; do
  [ -x "$b" ] || { echo "moe-ab: $b is not an executable"; exit 2; }
  v=$(echo "$b" | tr '/' '_')
  d="$OUT/ab/${run}_$v"
  echo "== run $run: $b"
  "$b" --out "$d" "$@" > "$d.log" 2>&1
  rc=$?
  echo "rc=$rc $(tail -n 3 "$d.log" | head -n 1)"
  [ $rc -eq 0 ] || failed=$((failed + 1))  # (its rows still count where it wrote them; the exit says so)
  run=$((run + 1))
done
python3 - "$OUT/ab" <<'EOF'
import csv, glob, os, statistics, sys
root = sys.argv[1]
rows = {}
for d in sorted(glob.glob(os.path.join(root, '*_*/'))):
    v = os.path.basename(d.rstrip('/')).split('_', 1)[1]
    m = os.path.join(d, 'moe.csv')
    if not os.path.exists(m):
        print('no moe.csv in', d); continue
    by = {}
    for r in csv.DictReader(open(m)):
        by.setdefault((r['shape'], r['tokens'], r['routing'], r['precision']), {})[r['backend']] = float(r['median_ms'])
    for key, b in by.items():
        for be, ms in b.items():
            if be.startswith('fused') and 'unfused' in b:
                rows.setdefault((v, key, be), {'ratio': [], 'l1': [], 'l2': []})['ratio'].append(b['unfused'] / ms)
    t = os.path.join(d, 'trace_summary.csv')
    if os.path.exists(t):
        for r in csv.DictReader(open(t)):
            key = (r['shape'], r['tokens'], r['routing'], r['precision'])
            c = float(r['clock_ghz'])
            e = rows.setdefault((v, key, 'fused_' + r['order']), {'ratio': [], 'l1': [], 'l2': []})
            e['l1'].append(float(r['l1_tflops_sm']) * 1e3 / c / 8192)
            e['l2'].append(float(r['l2_tflops_sm']) * 1e3 / c / 8192)
med = lambda x: f'{statistics.median(x):.3f}' if x else '-'
rng = lambda x: f'{min(x):.3f}-{max(x):.3f}' if x else '-'
with open(os.path.join(root, 'ab.csv'), 'w') as f:
    w = csv.writer(f)
    w.writerow(['variant', 'shape', 'tokens', 'routing', 'precision', 'backend', 'unfused_over_fused_median',
                'unfused_over_fused_range', 'l1_frac', 'l2_frac', 'runs'])
    print(f"{'variant':40s} {'config':40s} {'backend':20s} unf/fused (range)      L1     L2")
    for (v, key, be), e in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        w.writerow([v, *key, be, med(e['ratio']), rng(e['ratio']), med(e['l1']), med(e['l2']), len(e['ratio'])])
        print(f"{v:40s} {'/'.join(key):40s} {be:20s} {med(e['ratio'])} ({rng(e['ratio'])})  {med(e['l1'])}  {med(e['l2'])}")
EOF
[ $failed -eq 0 ] || { echo "moe-ab: $failed of ${#order[@]} runs failed (see their .log)"; exit 1; }
