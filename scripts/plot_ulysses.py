#!/usr/bin/env python3
"""Figure 11-like plot of the Ulysses study: per heads-per-rank, time of FA alone, Fused (sender-visible and
with completion) and Serial against the sequence length M, and the residual E_res = T_fused - T_FA.

    python3 scripts/plot_ulysses.py results/ulysses/emulated/summary.json -o results/ulysses/emulated/fig11.png

Input: the harness's ulysses.csv or its summary.json (same rows).
"""
import argparse
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="ulysses.csv or summary.json")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_ulysses: matplotlib is missing (scripts/deps.sh installs python3-matplotlib)")
    if a.csv.endswith(".json"):
        import json
        with open(a.csv) as f:
            rows = [{k: str(v) for k, v in r.items() if not isinstance(v, dict)} for r in json.load(f)["rows"]]
    else:
        with open(a.csv) as f:
            lines = [l for l in f if not l.startswith("#")]
        rows = list(csv.DictReader(lines))
    if not rows:
        sys.exit(f"plot_ulysses: no rows in {a.csv}")
    mode = rows[0]["mode"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for hp in sorted({int(r["heads_per_rank"]) for r in rows}):
        rs = sorted((r for r in rows if int(r["heads_per_rank"]) == hp), key=lambda r: int(r["M"]))
        m = [int(r["M"]) / 1024 for r in rs]
        ax1.plot(m, [float(r["fa_us"]) for r in rs], "o-", label=f"FA only, {hp} h/rank")
        ax1.plot(m, [float(r["fused_us"]) for r in rs], "s--", label=f"Fused, {hp} h/rank")
        ax1.plot(m, [float(r["serial_us"]) for r in rs], "^:", label=f"Serial, {hp} h/rank")
        ax2.plot(m, [float(r["E_res_us"]) for r in rs], "o-", label=f"E_res sender, {hp} h/rank")
        ax2.plot(m, [float(r["E_res_e2e_us"]) for r in rs], "s--", label=f"E_res with completion, {hp} h/rank")
    ax1.set_xlabel("M (K tokens)")
    ax1.set_ylabel("time per layer call (us)")
    ax1.set_yscale("log")
    ax1.legend(fontsize=7)
    ax2.axhline(0, color="gray", lw=0.5)
    ax2.set_xlabel("M (K tokens)")
    ax2.set_ylabel("E_res = T_fused - T_FA (us)")
    ax2.legend(fontsize=7)
    title = f"Ulysses attention, P = {rows[0]['ranks']}, D = {rows[0]['head_dim']} ({mode}"
    title += ": one GPU, no NVLink)" if mode == "emulated" else ")"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
