#!/usr/bin/env python3
"""The floors model (`xstage design moe-bound`) against the floors bench_moe measured, point by point.

    python3 scripts/moe-bound-check.py --xstage build/src/cli/xstage --runs DIR_W8A8 DIR_W4A8 [--platform P] [--md OUT.md]
        [--seed S]   (the runs' routing seed, 1)

Each row of the runs' summary.json (P = 1 rows with a timed memory floor: ms_stream) is predicted from the platform's
measured rates alone (its fp8 tensor-core rate and HBM read rate, neither fitted to these points) for the same shape,
precision, routing, seed and token count: compute_ms against the row's cuBLASLt ceiling (ms_ceiling), memory_ms
against its stream (ms_stream), and whether both call the point memory- or compute-bound. Prints one line per point
and the summary (median and largest relative error of each floor, the agreeing verdicts); exits 1 on a run without
such rows, 2 on bad arguments."""
import argparse
import json
import os
import statistics
import subprocess
import sys


def predict(xs, platform, r, seed):
    cmd = [xs, "design", "moe-bound", "--platform", platform, "--shape", r["shape"], "--tokens", str(r["tokens"]),
           "-P", "1", "--precision", r["precision"], "--routing", r["routing"], "--seed", str(seed), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"moe-bound-check: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xstage", required=True, help="the xstage binary")
    ap.add_argument("--runs", nargs="+", required=True, help="bench_moe output folders (summary.json)")
    ap.add_argument("--platform", default="h200-nvlink4")
    ap.add_argument("--seed", type=int, default=1, help="the runs' bench_moe --seed")
    ap.add_argument("--md", help="also write the table as Markdown here")
    a = ap.parse_args()
    rows = []
    for d in a.runs:
        s = json.load(open(os.path.join(d, "summary.json")))
        if s.get("ranks", 1) != 1:
            sys.exit(f"moe-bound-check: {d} ran {s['ranks']} ranks; this check is for P = 1 runs")
        rows += [r for r in s["rows"] if "ms_stream" in r and "ms_ceiling" in r]
    if not rows:
        sys.exit("moe-bound-check: no P = 1 row with a timed memory floor (ms_stream) in the runs")
    lines = ["| shape | prec | routing | tokens | ceiling ms | predicted | err | stream ms | predicted | err | "
             "measured | predicted |", "|" + " --- |" * 12]
    ec, em, agree = [], [], 0
    for r in rows:
        q = predict(a.xstage, a.platform, r, a.seed)
        c, m = q["compute_ms"] / r["ms_ceiling"] - 1, q["memory_ms"] / r["ms_stream"] - 1
        ec.append(c)
        em.append(m)
        meas = "memory" if r["ms_stream"] > r["ms_ceiling"] else "compute"
        agree += meas == q["bound_by"]
        lines.append(f'| {r["shape"]} | {r["precision"]} | {r["routing"]} | {r["tokens"]} | {r["ms_ceiling"]:.3f} | '
                     f'{q["compute_ms"]:.3f} | {100 * c:+.1f} % | {r["ms_stream"]:.3f} | {q["memory_ms"]:.3f} | '
                     f'{100 * m:+.1f} % | {meas} | {q["bound_by"]} |')
    summ = (f"{len(rows)} points; compute floor error median {100 * statistics.median(ec):+.1f} %, range "
            f"{100 * min(ec):+.1f} .. {100 * max(ec):+.1f} %; memory floor error median {100 * statistics.median(em):+.1f} %, "
            f"range {100 * min(em):+.1f} .. {100 * max(em):+.1f} %; verdict (memory- or compute-bound) agrees on "
            f"{agree} of {len(rows)}")
    print("\n".join(lines))
    print(summ)
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(lines) + "\n\n" + summ + "\n")


if __name__ == "__main__":
    main()
