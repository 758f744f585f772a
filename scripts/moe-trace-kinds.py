#!/usr/bin/env python3
"""Where a traced fused-MoE layer's SM-time goes, by tile kind (docs/MOE-NOTEBOOK.md, "Session 29").

    python3 scripts/moe-trace-kinds.py TILES.csv[.gz] [...] [--bin-us 20]

Reads the per-tile trace `bench_moe --trace --trace-csv` writes and prints, per (file, shape, tokens, routing, order):
the layer's span, the CTAs, the SM clock over the mainloops (cycles / ns), and per kind (L1 / L2, full / half) the
tiles, their SM-ms and mean mainloop time, the share of the mainloop spent waiting for full stages (data), the mean
wait for the first stage and the mean time from the mainloop's end to the CTA's next mainloop; then the half-tile
concurrency table: each tile's mainloop time grouped by how many half tiles ran beside it on average (bins of
--bin-us), which says whether the half tiles slow each other down (a shared HBM) or not; then the layer's tail: how long
the CTAs wait after their last mainloop for the last one to end (mean and max, and its share of the layer's SM-time),
the CTAs inside a mainloop per tenth of the span, and the (kind, expert, row) groups whose mainloops end last (the
layer's closing dependency chain: a row's Linear-1 tiles, then its Linear-2 tiles). Session 55 read a short layer's
tail this way (docs/MOE.md). Last, the tile times `xstage simulate moe --t-l1 --t-l2` takes (docs/SIMULATOR.md).
"""
import argparse
import collections
import csv
import gzip
import sys


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return list(csv.DictReader(f))


def tile_kind(r):
    """A traced tile's kind: (L1 / L2, full / half)."""
    return r["kind"], "half" if r["half"] == "1" else "full"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tiles", nargs="+")
    ap.add_argument("--bin-us", type=float, default=20.0, help="time bin of the concurrency count (us)")
    a = ap.parse_args()
    if a.bin_us <= 0:
        sys.exit(f"moe-trace-kinds: --bin-us must be positive, got {a.bin_us}")
    for path in a.tiles:
        rows = read(path)
        need = {"shape", "tokens", "routing", "order", "cta", "kind", "half", "mma_start_ns", "mma_end_ns", "mma_cycles",
                "epi_start_ns"}
        if not rows or not need <= set(rows[0]):
            sys.exit(f"moe-trace-kinds: {path}: not a per-tile trace (needs columns {sorted(need)})")
        groups = collections.defaultdict(list)
        for r in rows:
            groups[(r["shape"], r["tokens"], r["routing"], r["order"])].append(r)
        for key, R in sorted(groups.items()):
            t0 = min(int(r["mma_start_ns"]) for r in R)
            t1 = max(int(r["epi_start_ns"]) for r in R)
            ctas = len({r["cta"] for r in R})
            cyc = sum(int(r["mma_cycles"]) for r in R)
            ns = sum(int(r["mma_end_ns"]) - int(r["mma_start_ns"]) for r in R)
            sm_ms = ctas * (t1 - t0) / 1e6
            print(f"{path}: {' '.join(key)}: span {(t1 - t0) / 1e6:.3f} ms on {ctas} CTAs = {sm_ms:.1f} SM-ms, "
                  f"clock {cyc / ns:.3f} GHz")
            busy = collections.defaultdict(float)
            count = collections.Counter()
            cycles = collections.Counter()
            waited = collections.Counter()  # cycles waiting for full stages (data), all K blocks
            first = collections.Counter()   # cycles until the first stage was full
            gap = collections.defaultdict(float)  # ns from this tile's mainloop end to the CTA's next mainloop start
            # What `xstage simulate moe --t-l1 --t-l2` takes: per L1 / L2, the ns from a tile's mainloop start to the
            # CTA's next one (its mainloop, its tile end and the gap; a CTA's last tile has no next).
            step = collections.defaultdict(list)
            by_cta = collections.defaultdict(list)
            for r in R:
                k = tile_kind(r)
                busy[k] += (int(r["mma_end_ns"]) - int(r["mma_start_ns"])) / 1e6
                count[k] += 1
                cycles[k] += int(r["mma_cycles"])
                waited[k] += int(r.get("full_wait_cycles") or 0)
                first[k] += int(r.get("first_wait_cycles") or 0)
                by_cta[r["cta"]].append(r)
            for rs in by_cta.values():
                rs.sort(key=lambda r: int(r["mma_start_ns"]))
                for r, nxt in zip(rs, rs[1:]):
                    gap[tile_kind(r)] += int(nxt["mma_start_ns"]) - int(r["mma_end_ns"])
                    step[r["kind"]].append(int(nxt["mma_start_ns"]) - int(r["mma_start_ns"]))
            ghz = cyc / ns if ns else 1.0
            print("  kind      tiles      SM-ms  us/tile  data wait  first wait us  gap to next us")
            for k in sorted(busy):
                print(f"  {k[0]} {k[1]:4s} {count[k]:6d} {busy[k]:10.1f} {busy[k] / count[k] * 1e3:8.1f} "
                      f"{waited[k] / max(cycles[k], 1):9.1%} {first[k] / count[k] / ghz / 1e3:14.2f} "
                      f"{gap[k] / count[k] / 1e3:15.2f}")
            print(f"  other (outside mainloops) {sm_ms - sum(busy.values()):8.1f} SM-ms")
            # half tiles running, averaged per bin
            B = int(a.bin_us * 1000)
            occ = in_mainloop([r for r in R if r["half"] == "1"], t0, B,
                              (max(int(r["mma_end_ns"]) for r in R) - t0) // B + 2)
            bands = collections.defaultdict(list)
            for r in R:
                s, e = int(r["mma_start_ns"]) - t0, int(r["mma_end_ns"]) - t0
                bs = range(s // B, e // B + 1)
                c = sum(occ[b] for b in bs) / len(bs)
                bands[(r["kind"], r["half"], min(int(c // 20) * 20, 100))].append((e - s) / 1000)
            print("  mainloop us by half tiles running beside it (0-20, 20-40, ...):")
            for kind, half in sorted({(k[0], k[1]) for k in bands}):
                cells = " ".join(f"{b}+: {len(v)} x {sum(v) / len(v):.1f}"
                                 for (k0, k1, b), v in sorted(bands.items()) if (k0, k1) == (kind, half))
                print(f"    {kind} {'half' if half == '1' else 'full'}: {cells}")
            if step.get("L1") and step.get("L2"):
                mean = {k: sum(v) / len(v) / 1e3 for k, v in step.items()}
                rows = len({(r["expert"], r["row"]) for r in R})
                print(f"  simulator tile times: --t-l1 {mean['L1']:.2f} --t-l2 {mean['L2']:.2f} (us; {rows} rows of "
                      "tiles; with --routing uniform --seed <the harness's seed> the simulator sees the same rows)")
            tail(R, t0)


def in_mainloop(R, t0, width, bins):
    """Per bin of `width` ns from t0: how many of the tiles R were inside their mainloop, on average."""
    occ = [0.0] * bins
    for r in R:
        s, e = int(r["mma_start_ns"]) - t0, int(r["mma_end_ns"]) - t0
        b = int(s // width)
        while b < bins and b * width < e:
            occ[b] += (min(e, (b + 1) * width) - max(s, b * width)) / width
            b += 1
    return occ


def tail(R, t0):
    """The layer's end: idle CTAs after their last mainloop, mainloop occupancy per tenth, the last groups."""
    t1 = max(int(r["mma_end_ns"]) for r in R)
    span = t1 - t0
    last = collections.defaultdict(int)
    for r in R:
        last[r["cta"]] = max(last[r["cta"]], int(r["mma_end_ns"]))
    idle = [t1 - e for e in last.values()]
    print(f"  tail: CTAs idle after their last mainloop {sum(idle) / len(idle) / 1e3:.1f} us on average, "
          f"{max(idle) / 1e3:.1f} max: {sum(idle) / (len(idle) * span):.1%} of the SM-time to the last mainloop's end")
    occ = in_mainloop(R, t0, span / 10, 10)
    print("  CTAs in a mainloop per tenth of the span: " + " ".join(f"{o:.0f}" for o in occ))
    first = collections.defaultdict(lambda: 1 << 62)
    end = collections.defaultdict(int)
    for r in R:
        g = (r["kind"], int(r["expert"]), int(r["row"]), "half" if r["half"] == "1" else "full")
        first[g] = min(first[g], int(r["mma_start_ns"]))
        end[g] = max(end[g], int(r["mma_end_ns"]))
    print("  groups ending last (kind expert row: first mainloop start .. last end, us from the first tile):")
    for g in sorted(end, key=lambda g: end[g])[-6:]:
        print(f"    {g[0]} e{g[1]} row {g[2]} ({g[3]}): {(first[g] - t0) / 1e3:.1f} .. {(end[g] - t0) / 1e3:.1f}")


if __name__ == "__main__":
    main()
