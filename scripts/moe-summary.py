#!/usr/bin/env python3
"""Merge bench_moe runs (one per precision) into the issue summaries, tables and plots.

  python3 scripts/moe-summary.py --runs results/moe/runs/call8 results/moe/runs/call9/w4 \
      --dsweep results/moe/runs/call9/dsweep --out-moe results/moe/p1 --out-schedule results/moe-schedule/p1
  # real ranks (issue 14: runs of `xstage launch -n 2 -- bench_moe ...`):
  python3 scripts/moe-summary.py --runs DIR... --out-moe results/moe --out-schedule results/moe-schedule

Each run folder holds what bench/moe/bench_moe wrote (summary.json, schedule_summary.json, moe.csv). The
merged summaries keep every run's command; nothing is recomputed from timings except the aggregates
(geomean, min) over the union of the runs' configurations. --tiles DIR adds a run's traced tiles (bench_moe
--trace-csv); --reapply-auto-p1 and --reapply-l1-first re-analyse rows timed under an earlier rule of auto (--help).
"""
import argparse
import csv
import json
import math
import os
import sys


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def median(xs):
    s = sorted(x for x in xs if x is not None)  # None: a trace median over no tiles (e.g. no full tiles)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def spearman(x, y):
    """Spearman's rank correlation with average ranks for ties (None when a side is constant)."""
    def ranks(v):
        idx = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(idx):
            j = i
            while j + 1 < len(idx) and v[idx[j + 1]] == v[idx[i]]:
                j += 1
            for k in range(i, j + 1):
                r[idx[k]] = 0.5 * (i + j)
            i = j + 1
        return r
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", required=True, help="bench_moe output folders")
    ap.add_argument("--dsweep", help="bench_moe folder run with --leads (the D sweep)")
    ap.add_argument("--tiles", help="bench_moe folder run with --trace-csv tiles.csv (every traced tile)")
    ap.add_argument("--reapply-auto-p1", action="store_true",
                    help="P = 1 rows timed before auto followed the simulator (no fused_backend): take as fused the "
                         "order auto picked from the row's own simulator times under the rule of sessions 21-52 (interleaved iff "
                         "sim_interleaved_us < sim_wave_us; session 53 sends some ties to interleaved, "
                         "moe::choose_moe_order) -- a re-analysis of measured "
                         "rows, labelled as such in the summaries")
    ap.add_argument("--reapply-l1-first", action="store_true",
                    help="P = 1 rows that timed every Linear-1 tile first (ms_fused_l1first) under an earlier rule: take as "
                         "fused the order auto picks now from the row's own simulator times (every Linear-1 tile first "
                         "where sim_interleaved_all_us < (1 - 1e-6) min(sim_wave_us, sim_interleaved_us), "
                         "moe::choose_moe_order since session 60) -- a re-analysis of measured rows, labelled as such")
    ap.add_argument("--out-moe", required=True)
    ap.add_argument("--out-schedule", required=True)
    a = ap.parse_args()

    rows, commands, machines, emulated, worlds = [], [], set(), None, set()
    builds = {"kernel_build": set(), "padding_rows": set()}  # what the runs say of their kernel and padding rows
    softwares = set()  # each run's "software" object (xstage revision, CUDA / NCCL versions), as sorted JSON text
    sched_rows = []
    for d in a.runs:
        s = load(os.path.join(d, "summary.json"))
        rows += s["rows"]
        commands.append(s["command"])
        machines.add(s["machine"])
        worlds.add(s.get("ranks", 1))
        for key in builds:
            if key in s:
                builds[key].add(s[key])
        if "software" in s:
            softwares.add(json.dumps(s["software"], sort_keys=True))
        emu = set(s["emulated_ranks_tested"])
        emulated = emu if emulated is None else emulated & emu
        sp = os.path.join(d, "schedule_summary.json")
        if os.path.exists(sp):
            sched_rows.append(load(sp))
    if len(machines) != 1:
        sys.exit(f"runs from different machines: {sorted(machines)}")
    machine = machines.pop()
    if len(worlds) != 1:
        sys.exit(f"runs at different world sizes: {sorted(worlds)}")
    P = worlds.pop()
    tag = f"p{P}"

    reapplied = 0
    if a.reapply_auto_p1:
        if P != 1:
            sys.exit("--reapply-auto-p1 is for P = 1 runs")
        for r in rows:
            if "fused_backend" in r or "sim_wave_us" not in r or "ms_fused_interleaved" not in r:
                continue
            inter = r["sim_interleaved_us"] < r["sim_wave_us"]
            fb = "fused_interleaved" if inter else "fused_wave"
            tf, tw, ti = r["ms_" + fb], r["ms_fused_wave"], r["ms_fused_interleaved"]
            r.update({"fused_backend": fb, "auto_order": "interleaved" if inter else "expert-wave",
                      "fused_vs_unfused": r["ms_unfused"] / tf, "ceiling_fraction": r["ms_ceiling"] / tf,
                      "auto_vs_best": min(tw, ti) / tf, "auto_vs_wave": tw / tf,
                      "auto_reason": f'{"interleaved" if inter else "expert-wave"}: re-applied from the row\'s simulator '
                                     f'times {r["sim_interleaved_us"]:.2f} us interleaved vs {r["sim_wave_us"]:.2f} us '
                                     f'expert-wave'})
            r.pop("fused_vs_unfused_flipped", None)  # the order check was made against the other backend
            reapplied += 1

    relabelled = 0
    if a.reapply_l1_first:
        if P != 1:
            sys.exit("--reapply-l1-first is for P = 1 runs")
        for r in rows:
            if "ms_fused_l1first" not in r or not r.get("sim_interleaved_all_us") or "sim_wave_us" not in r:
                continue
            l1f = r["sim_interleaved_all_us"] < (1 - 1e-6) * min(r["sim_wave_us"], r["sim_interleaved_us"])
            if l1f == (r.get("fused_backend") == "fused_l1first"):
                continue
            if not l1f:
                sys.exit(f'--reapply-l1-first: {r["shape"]} {r["precision"]} {r["tokens"]} {r["routing"]} took '
                         "fused_l1first, which the current rule would not: re-run instead")
            tf = r["ms_fused_l1first"]
            times = [r[k] for k in ("ms_fused_wave", "ms_fused_interleaved", "ms_fused_wave_g1", "ms_fused_l1first") if k in r]
            r.update({"fused_backend": "fused_l1first", "auto_l1_first": 1, "auto_order": "interleaved",
                      "fused_vs_unfused": r["ms_unfused"] / tf, "ceiling_fraction": r["ms_ceiling"] / tf,
                      "auto_vs_best": min(times) / tf, "auto_vs_wave": r["ms_fused_wave"] / tf,
                      "auto_reason": f'l1-first: re-applied from the row\'s simulator times {r["sim_interleaved_all_us"]:.2f} us '
                                     f'every Linear-1 tile first vs {r["sim_wave_us"]:.2f} us expert-wave and '
                                     f'{r["sim_interleaved_us"]:.2f} us interleaved'})
            r.pop("fused_vs_unfused_flipped", None)  # the order check was made against the other backend
            relabelled += 1

    ratios = [r["fused_vs_unfused"] for r in rows if r.get("fused_vs_unfused") is not None]
    v4, v4b = {}, {}
    for r in rows:
        if r["shape"].startswith("deepseek-v4") and r["precision"] == "w8a8" and "ceiling_fraction" in r:
            k = r["tokens"]
            v4[k] = min(v4.get(k, 1e9), r["ceiling_fraction"])
            if "bound_fraction" in r:  # the fraction of the roofline (runs since session 62)
                v4b[k] = min(v4b.get(k, 1e9), r["bound_fraction"])
    moe = {
        "configs": len(rows),
        "correct_configs": sum(1 for r in rows if r["correct"]),
        "ranks": P,
        "geomean_fused_vs_unfused": geomean(ratios),
        "min_fused_vs_unfused": min(ratios) if ratios else None,
        "ceiling_fraction_v4_w8a8_8k": v4.get(8192),
        "ceiling_fraction_v4_w8a8_32k": v4.get(32768),
        "bound_fraction_v4_w8a8_8k": v4b.get(8192),
        "bound_fraction_v4_w8a8_32k": v4b.get(32768),
        "memory_bound_configs": sum(1 for r in rows if r.get("bound_by") == "memory"),
        "emulated_ranks_tested": sorted(emulated or []),
        "emulated_note": "emulated P ranks on one GPU split the same global batch (T/P tokens per rank): output "
                         "bit-identical to P = 1 on every token, at 2048 tokens, every shape, precision and routing",
        "fused_beats_unfused_everywhere": bool(ratios) and min(ratios) > 1.0,
        # the ABBA order check of each fused/unfused ratio (its two halves on either side of 1: not a result);
        # rows re-analysed by --reapply-* lost theirs (made against another backend) and are not counted
        "fused_vs_unfused_order_checked": sum(1 for r in rows if "fused_vs_unfused_flipped" in r),
        "fused_vs_unfused_flipped": [f'{r["shape"]} {r["precision"]} {r["routing"]} T={r["tokens"]}: {r["fused_vs_unfused"]:.3f}'
                                     for r in rows if r.get("fused_vs_unfused_flipped")],
        "configs_fused_slower": [f'{r["shape"]} {r["precision"]} {r["routing"]} T={r["tokens"]}: {r["fused_vs_unfused"]:.3f}'
                                 for r in rows if r.get("fused_vs_unfused", 2) < 1.0],
        "machine": machine,
        "command": commands,
        "written_by": "bench/moe/bench_moe (one run per precision), merged by scripts/moe-summary.py",
    }
    for key, vals in builds.items():  # (runs before session 57 wrote neither key)
        if vals:
            moe[key] = vals.pop() if len(vals) == 1 else sorted(vals)
    if softwares:  # (runs before session 80 wrote none): one object, or every distinct one
        objs = [json.loads(x) for x in sorted(softwares)]
        moe["software"] = objs[0] if len(objs) == 1 else objs
    if reapplied:
        moe["written_by"] += (f"; re-analysis (--reapply-auto-p1): in {reapplied} rows the fused column is the order "
                              "auto picks now from the row's simulator times, both orders having been timed in that run")
        moe["fused_orders"] = {o: sum(1 for r in rows if r.get("fused_backend") == "fused_" + o)
                               for o in ("wave", "interleaved")}
    if relabelled:
        moe["written_by"] += (f"; re-analysis (--reapply-l1-first): in {relabelled} rows the fused column is every Linear-1 "
                              "tile first, which auto picks now from the row's simulator times, timed in that run")
    if P == 1:
        moe["geomean_fused_vs_unfused_p1"] = moe["geomean_fused_vs_unfused"]
        moe["min_fused_vs_unfused_p1"] = moe["min_fused_vs_unfused"]
    else:
        twin = [r for r in rows if "p1_twin_bitwise_equal" in r]
        moe["p1_twin_configs"] = len(twin)
        moe["p1_twin_bitwise_equal_configs"] = sum(1 for r in twin if r["p1_twin_bitwise_equal"])
        moe["emulated_note"] = ("real ranks: correctness per rank against the host reference and the EP unfused path, "
                                "and (p1_twin_*) every rank's output rows against its slice of the whole global batch "
                                "run at P = 1 on its GPU, bit for bit")
        moe["written_by"] = f"bench/moe/bench_moe under `xstage launch -n {P}`, merged by scripts/moe-summary.py"
    os.makedirs(a.out_moe, exist_ok=True)
    with open(os.path.join(a.out_moe, "summary.json"), "w") as f:
        json.dump(moe, f, indent=1)

    # the P = 1 table of issue 11
    def tolerance(r):  # bench_moe's reference check: half the reference's own requantisation error (fixed 1e-2 before s46)
        return f'{0.5 * r["ref_requant_rel_rms"]:.1e}' if "ref_requant_rel_rms" in r else "1.0e-02"

    def bound_cells(r):  # the memory floor's time and the fraction of the larger floor (m: memory, c: compute)
        if "ms_stream" not in r or "bound_fraction" not in r:
            return "- | -"
        return f'{r["ms_stream"]:.3f} | {r["bound_fraction"]:.3f} {r["bound_by"][0]}'

    with open(os.path.join(a.out_moe, "table.md"), "w") as f:
        f.write("| shape | prec | routing | tokens | fused order | fused ms | unfused ms | fused/unfused | "
                "fused TFLOP/s | ceiling TFLOP/s | fraction of ceiling | stream ms | fraction of bound | ref rel. err | "
                "tolerance | correct |\n")
        f.write("|" + " --- |" * 16 + "\n")
        for r in rows:
            fl = r["flops"]
            # the fused column is the order the harness timed as "fused" (auto's choice; runs before it: wave)
            fb = r.get("fused_backend", "fused_wave")
            fms = r["ms_" + fb]
            label = {"wave_g1": "wave-lagged", "wave_g0": "wave", "l1first": "l1-first"}.get(fb[len("fused_"):], fb[len("fused_"):])
            f.write(f'| {r["shape"]} | {r["precision"]} | {r["routing"]} | {r["tokens"]} | {label} | '
                    f'{fms:.3f} | {r["ms_unfused"]:.3f} | {r["fused_vs_unfused"]:.3f} | {fl / fms / 1e9:.0f} | '
                    f'{fl / r["ms_ceiling"] / 1e9:.0f} | {r["ceiling_fraction"]:.3f} | {bound_cells(r)} | {r["ref_rel_rms"]:.1e} | '
                    f'{tolerance(r)} | {"yes" if r["correct"] else "NO"} |\n')

    # issue 12 (P = 1) / issue 14 (real ranks)
    sr = [r["interleaved_vs_wave"] for r in rows if "interleaved_vs_wave" in r]
    viol = [r["interleaved_vs_wave"] for r in rows if "interleaved_vs_wave" in r and r.get("rate_bound_violated_wave")]
    avb = [r["auto_vs_best"] for r in rows if "auto_vs_best" in r]
    avw = [r["auto_vs_wave"] for r in rows if "auto_vs_wave" in r]
    st = [(r["predicted_stall_wave_us"], r["trace_wave"]["slot_wait_us"]) for r in rows
          if "trace_wave" in r and "predicted_stall_wave_us" in r]
    sim = [(r["sim_interleaved_vs_wave"], r["interleaved_vs_wave"]) for r in rows
           if "sim_interleaved_vs_wave" in r and "interleaved_vs_wave" in r]
    by_route = {k: geomean([r["interleaved_vs_wave"] for r in rows if "interleaved_vs_wave" in r and r["routing"] == k])
                for k in ("balanced", "skewed")}
    autos = []
    for s in sched_rows:
        autos += s["auto_choices"]
    if reapplied:  # the runs' auto_choices were made by the rule of their day
        autos = [{"shape": r["shape"], "tokens": r["tokens"], "routing": r["routing"], "precision": r["precision"],
                  "order": r["auto_order"], "reason": r["auto_reason"]} for r in rows if "auto_order" in r]
    sched = {
        "configs": sum(s["configs"] for s in sched_rows),
        "bitwise_equal_configs": sum(s["bitwise_equal_configs"] for s in sched_rows),
        "geomean_interleaved_vs_wave": geomean(sr),
        "median_interleaved_vs_wave": median(sr),
        "max_speedup": max(sr) if sr else None,
        "min_speedup": min(sr) if sr else None,
        "geomean_balanced": by_route["balanced"],
        "geomean_skewed": by_route["skewed"],
        "violated_configs": len(viol),
        "geomean_violated": geomean(viol),
        "auto_min_vs_best": min(avb) if avb else None,
        "auto_min_vs_wave": min(avw) if avw else None,
        # the ABBA order check of each interleaved/wave ratio (runs since session 81; older rows have no flag)
        "interleaved_vs_wave_order_checked": sum(1 for r in rows if "interleaved_vs_wave_flipped" in r),
        "interleaved_vs_wave_flipped": [f'{r["shape"]} {r["precision"]} {r["routing"]} T={r["tokens"]}: '
                                        f'{r["interleaved_vs_wave"]:.3f}' for r in rows if r.get("interleaved_vs_wave_flipped")],
        "stall_rank_corr": spearman([p for p, _ in st], [m for _, m in st]) if len(st) >= 3 else None,
        "stall_points": len(st),
        # the discrete-event simulator's interleaved/wave speedup vs the measured one, per configuration (out of
        # sample: the simulator is not fitted to these runs); rows carry both (sim_interleaved_vs_wave)
        "sim_speedup_rank_corr": spearman([p for p, _ in sim], [m for _, m in sim]) if len(sim) >= 3 else None,
        "sim_same_side_configs": sum(1 for p, m in sim if (p > 1) == (m > 1)),
        "sim_points": len(sim),
        "ranks": P,
        "ranks_label": (f"P = 1 on one GPU ({machine}): no NVLink traffic; only the order's locality and balance show"
                        if P == 1 else f"P = {P} real ranks, one process per GPU over NCCL"),
        "auto_choices": autos,
        "machine": machine,
        "command": commands,
        "written_by": "bench/moe/bench_moe --orders wave,interleaved (schedule_summary.json per run), merged by "
                      "scripts/moe-summary.py",
    }
    if P == 1:
        sched.update({
            "p1_min_interleaved_vs_wave": sched["min_speedup"],
            "p1_median_interleaved_vs_wave": sched["median_interleaved_vs_wave"],
            "p1_max_interleaved_vs_wave": sched["max_speedup"],
            "p1_geomean_interleaved_vs_wave": sched["geomean_interleaved_vs_wave"],
            "p1_geomean_by_routing": by_route,
            "auto_picks_wave_at_p1": all(c["order"] == "expert-wave" for c in autos),
        })
    if a.dsweep:
        rs = list(csv.DictReader(open(os.path.join(a.dsweep, "moe.csv"))))
        sweep = {}
        for r in rs:
            key = f'{r["shape"]} {r["routing"]} T={r["tokens"]}'
            sweep.setdefault(key, {})[r["backend"]] = float(r["median_ms"])
        table = {}
        for k, v in sweep.items():
            w = v["fused_wave"]
            table[k] = {b.replace("fused_interleaved_D", "D=").replace("fused_interleaved", "D_knee"): w / t
                        for b, t in v.items() if b.startswith("fused_interleaved")}
        sched["d_sweep_interleaved_vs_wave"] = table
        sched["d_sweep_command"] = load(os.path.join(a.dsweep, "summary.json"))["command"]
    # Table 2 of the paper, per model (W8A8, medians over token counts and routings): the L2 epilogue's
    # sender-visible store span T_RS and the mainloops under both orders, the MMA-side wait for a staging
    # slot (measured stall) and the model's predicted stall per L2 tile.
    t2 = {}
    for r in rows:
        if r["precision"] != "w8a8" or "trace_wave" not in r or "trace_interleaved" not in r:
            continue
        e = t2.setdefault(r["shape"], {k: [] for k in ("trs_w", "trs_i", "l1_w", "l1_i", "l2_w", "l2_i", "st_w", "st_i",
                                                         "pw", "pi")})
        w, i = r["trace_wave"], r["trace_interleaved"]
        e["trs_w"].append(w["trs_us"]); e["trs_i"].append(i["trs_us"])
        e["l1_w"].append(w["l1_mma_us"]); e["l1_i"].append(i["l1_mma_us"])
        e["l2_w"].append(w["l2_mma_us"]); e["l2_i"].append(i["l2_mma_us"])
        e["st_w"].append(w["slot_wait_us"]); e["st_i"].append(i["slot_wait_us"])
        e["pw"].append(r.get("predicted_stall_wave_us", 0.0)); e["pi"].append(r.get("predicted_stall_interleaved_us", 0.0))
    table2 = {k: {f: median(v) for f, v in e.items()} for k, e in t2.items()}
    sched["table2_" + tag] = table2
    os.makedirs(a.out_schedule, exist_ok=True)
    with open(os.path.join(a.out_schedule, "table2.md"), "w") as f:
        f.write(("P = 1 (no NVLink: T_RS is the span of local combine stores)" if P == 1 else
                 f"P = {P} real ranks (T_RS: the span of the combine stores, (P-1)/P of them over NVLink; mean over ranks)")
                + ", W8A8, medians over the token counts and routings; us per tile.\n\n")
        f.write("| model | T_RS wave | T_RS interleaved | L1 mainloop wave / int. | L2 mainloop wave / int. | "
                "measured stall (slot wait) wave / int. | predicted stall wave / int. |\n")
        f.write("|" + " --- |" * 7 + "\n")
        for k, e in table2.items():
            f.write(f'| {k} | {e["trs_w"]:.2f} | {e["trs_i"]:.2f} | {e["l1_w"]:.2f} / {e["l1_i"]:.2f} | '
                    f'{e["l2_w"]:.2f} / {e["l2_i"]:.2f} | {e["st_w"]:.3f} / {e["st_i"]:.3f} | {e["pw"]:.2f} / {e["pi"]:.2f} |\n')
    with open(os.path.join(a.out_schedule, "summary.json"), "w") as f:
        json.dump(sched, f, indent=1)
    # the instrumentation's CSVs: per configuration (trace_summary.csv of each run) and per tile (--trace-csv)
    import shutil
    for d in a.runs + ([a.tiles] if a.tiles else []):
        for name in os.listdir(d):
            if name.startswith("trace_summary") and name.endswith(".csv") or name.startswith("tiles.csv"):
                shutil.copy(os.path.join(d, name), os.path.join(a.out_schedule, f"{os.path.basename(d)}_{name}"))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plots", file=sys.stderr)
        return
    # Figure 8 style: per configuration speedup of interleaved over expert-wave
    pts = [r for r in rows if "interleaved_vs_wave" in r]
    fig, ax = plt.subplots(figsize=(12, 4))
    xs = range(len(pts))
    ax.bar(xs, [r["interleaved_vs_wave"] for r in pts],
           color=["tab:blue" if r["routing"] == "balanced" else "tab:orange" for r in pts])
    sim_x = [i for i, r in enumerate(pts) if "sim_interleaved_vs_wave" in r]
    if sim_x:  # the simulator's prediction beside every measurement
        ax.plot(sim_x, [pts[i]["sim_interleaved_vs_wave"] for i in sim_x], "k_", ms=8, mew=1.5,
                label="simulator (predicted)")
        ax.legend(fontsize=7, loc="upper left")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f'{r["shape"][:10]} {r["precision"]} {r["tokens"] // 1024}K {r["routing"][0]}' for r in pts],
                       rotation=90, fontsize=6)
    ax.set_ylabel("T(expert-wave) / T(interleaved)")
    ax.set_title(f"Interleaved vs Expert-Wave at P = {P} ({machine}; blue balanced, orange skewed)")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out_schedule, f"speedup_{tag}.png"), dpi=120)
    if a.dsweep:
        fig, ax = plt.subplots(figsize=(6, 4))
        for k, v in sched["d_sweep_interleaved_vs_wave"].items():
            ds = sorted((int(b[2:]), x) for b, x in v.items() if b.startswith("D="))
            ax.plot([d for d, _ in ds], [x for _, x in ds], marker="o", label=k)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xlabel("lead D (scheduler rows)")
        ax.set_ylabel("T(expert-wave) / T(interleaved)")
        ax.legend(fontsize=6)
        ax.set_title(f"Lead sweep at P = {P}")
        fig.tight_layout()
        fig.savefig(os.path.join(a.out_schedule, f"lead_sweep_{tag}.png"), dpi=120)


if __name__ == "__main__":
    main()
