#!/usr/bin/env python3
"""Plots of SPEC §4 Figures 3(a)-(d) from an `xstage calibrate` output folder.

Usage: plot_calibration.py OUT_DIR   (reads calibration.csv, validation.csv, platform.json; writes fig3*.png)
Model curves are the calibrate command's own predictions (validation.csv, nothing refitted here).
"""
import csv
import json
import os
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def num(r, k):
    return float(r[k])


def main(out):
    import matplotlib  # here, so that --help and a wrong call need no matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = rows(os.path.join(out, "calibration.csv"))
    val_path = os.path.join(out, "validation.csv")
    val = rows(val_path) if os.path.exists(val_path) else []
    plat = json.load(open(os.path.join(out, "platform.json"))) if os.path.exists(os.path.join(out, "platform.json")) else {}
    R = plat.get("R", 0)  # bytes/s
    base = [r for r in data if r["path"] == "st" and r["pattern"] == "p2p" and r["producer"] == "cta"]
    ks = sorted({int(r["K"]) for r in base})

    def pred(mode, K, quantity, B=None):
        pts = [(num(v, "gap_ns") if mode == "gap" else num(v, "V"), num(v, "predicted_ns"))
               for v in val if v["mode"] == mode and int(v["K"]) == K and v["quantity"] == quantity
               and (B is None or int(float(v["B"])) == B)]
        return sorted(pts)

    gap_B = sorted({int(float(r["B"])) for r in base if r["mode"] == "gap"})
    series = [(K, B) for B in gap_B for K in ks]

    # 3(a) T_iss vs G, remote and local control, model line.
    fig, ax = plt.subplots(figsize=(6, 4))
    for K, B in series:
        sel = [r for r in base if r["mode"] == "gap" and int(r["K"]) == K and int(float(r["B"])) == B]
        g = sorted((num(r, "gap_ns"), num(r, "tiss_ns")) for r in sel if r["target"] == "remote")
        if g:
            ax.plot([x / 1e3 for x, _ in g], [y / 1e3 for _, y in g], "o", ms=4, label=f"remote K={K} B={B // 1024}K")
            p = pred("gap", K, "tiss", B)
            if p:
                ax.plot([x / 1e3 for x, _ in p], [y / 1e3 for _, y in p], "-", lw=1, color=ax.lines[-1].get_color())
        loc = sorted((num(r, "gap_ns"), num(r, "tiss_ns")) for r in sel if r["target"] == "local")
        if loc:
            ax.plot([x / 1e3 for x, _ in loc], [y / 1e3 for _, y in loc], "x--", ms=4, label=f"local K={K} B={B // 1024}K")
    ax.set_xlabel("measured gap G (us)")
    ax.set_ylabel("T_iss (us)")
    ax.set_title("3(a) issue time vs gap; lines: Burst-Gap law (no refit)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig3a_tiss_vs_gap.png"), dpi=120)

    # 3(b) measured period vs model (and the completion-coupled G + V/R).
    fig, ax = plt.subplots(figsize=(6, 4))
    for K, B in series:
        g = sorted((num(r, "gap_ns"), num(r, "period_ns"), num(r, "V")) for r in base
                   if r["mode"] == "gap" and int(r["K"]) == K and int(float(r["B"])) == B and r["target"] == "remote")
        if not g:
            continue
        ax.plot([x / 1e3 for x, _, _ in g], [y / 1e3 for _, y, _ in g], "o", ms=4, label=f"K={K} B={B // 1024}K")
        c = ax.lines[-1].get_color()
        p = pred("gap", K, "period", B)
        if p:
            ax.plot([x / 1e3 for x, _ in p], [y / 1e3 for _, y in p], "-", color=c, lw=1)
        if R:
            ax.plot([x / 1e3 for x, _, _ in g], [(x + V / R * 1e9) / 1e3 for x, _, V in g], ":", color=c, lw=1)
    ax.set_xlabel("gap G (us)")
    ax.set_ylabel("T_period (us)")
    ax.set_title("3(b) period; solid: max(T0+G, V/R), dotted: G+V/R")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig3b_period_vs_model.png"), dpi=120)

    # 3(c) isolated bursts: T_iss vs V, with the model's knee.
    fig, ax = plt.subplots(figsize=(6, 4))
    for K in ks:
        g = sorted((num(r, "V"), num(r, "tiss_ns")) for r in base if r["mode"] == "isolated" and int(r["K"]) == K)
        if not g:
            continue
        ax.plot([x / 1e6 for x, _ in g], [y / 1e3 for _, y in g], "o", label=f"measured K={K}")
        p = pred("isolated", K, "tiss")
        if p:
            ax.plot([x / 1e6 for x, _ in p], [y / 1e3 for _, y in p], "-", lw=1, color=ax.lines[-1].get_color(),
                    label=f"max(T0, (V-Q)/R) K={K}")
    ax.set_xlabel("burst volume V (MB)")
    ax.set_ylabel("T_iss (us)")
    ax.set_title("3(c) isolated bursts after full recovery")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig3c_isolated_knee.png"), dpi=120)

    # 3(d) zero-gap period vs V for several K (one shared drain rate).
    fig, ax = plt.subplots(figsize=(6, 4))
    vmax = 0
    for K in ks:
        g = sorted((num(r, "V"), num(r, "period_ns")) for r in base if r["mode"] == "zerogap" and int(r["K"]) == K and r["target"] == "remote")
        if g:
            ax.plot([x / 1e6 for x, _ in g], [y / 1e3 for _, y in g], "o", label=f"K={K}")
            vmax = max(vmax, g[-1][0])
    if R and vmax:
        ax.plot([0, vmax / 1e6], [0, vmax / R * 1e6], "k-", lw=1, label=f"V/R, R = {R / 1e9:.0f} GB/s")
    ax.set_xlabel("burst volume V (MB)")
    ax.set_ylabel("zero-gap period (us)")
    ax.set_title("3(d) zero-gap period vs V")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig3d_zerogap_period.png"), dpi=120)
    print(f"# wrote {out}/fig3a_tiss_vs_gap.png fig3b_period_vs_model.png fig3c_isolated_knee.png fig3d_zerogap_period.png")


if __name__ == "__main__":
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
