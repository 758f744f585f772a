"""s73: from bench_moe --trace-csv records, (1) how long the CTAs sit idle at the layer's end (each CTA's last mainloop
end against the latest one), which bounds what a dynamic tile claim could give; (2) the SM-time by tile kind (Linear-1
or Linear-2, full or half) and each kind's microseconds per tile and weight bytes per microsecond per SM; (3) by tenths
of the layer, the half tiles' share of the SMs' mainloop time and each kind's median mainloop (tiles binned by start).
    python3 tile_ends.py HIDDEN INTER tiles.csv[.gz] ...
The weight bytes of a tile: an L1 tile 256 rows x HIDDEN bytes, an L2 tile 256 x INTER (W8A8; a weight-sharing pair
loads them once for two CTAs, so the per-SM figure is per tile, not per byte fetched)."""
import collections
import csv
import gzip
import statistics as st
import sys

TENTHS = 10

hidden, inter = int(sys.argv[1]), int(sys.argv[2])
for path in sys.argv[3:]:
    f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    rows = [r for r in csv.DictReader(f) if int(r["mma_start_ns"]) > 0]
    t0 = min(int(r["mma_start_ns"]) for r in rows)
    end = collections.defaultdict(int)
    for r in rows:
        c = int(r["cta"])
        end[c] = max(end[c], int(r["mma_end_ns"]) - t0)
    e_max = max(end.values())
    idle = [e_max - e for e in end.values()]
    print(f"{path}: {len(rows)} tiles on {len(end)} CTAs; first mainloop to last end {e_max / 1e3:.0f} us; "
          f"idle at the end: mean {st.mean(idle) / 1e3:.1f} us ({st.mean(idle) / e_max:.2%}), max {max(idle) / 1e3:.1f} us")
    agg = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        k = (r["kind"], "half" if r["half"] == "1" else "full")
        agg[k][0] += 1
        agg[k][1] += int(r["mma_end_ns"]) - int(r["mma_start_ns"])
    total = sum(v[1] for v in agg.values())
    for (kind, h), (n, ns) in sorted(agg.items()):
        wbytes = 256 * (hidden if kind == "L1" else inter)
        us = ns / n / 1e3
        print(f"  {kind} {h}: {n} tiles, {ns / 1e6:.0f} SM-ms ({ns / total:.1%}), {us:.1f} us/tile, "
              f"{wbytes / us / 1e3:.1f} GB/s of a tile's weights per SM")
    half_time = [[0, 0] for _ in range(TENTHS)]  # per tenth: full, half mainloop ns inside it
    starts = collections.defaultdict(list)  # (kind, half, tenth of its start) -> mainloop ns
    for r in rows:
        s, e, h = int(r["mma_start_ns"]) - t0, int(r["mma_end_ns"]) - t0, int(r["half"] == "1")
        first = int(s * TENTHS / e_max)  # the tenth the mainloop starts in
        for b in range(first, min(TENTHS, int(e * TENTHS / e_max) + 1)):
            half_time[b][h] += max(0, min(e, (b + 1) * e_max / TENTHS) - max(s, b * e_max / TENTHS))
        starts[(r["kind"], h, min(TENTHS - 1, first))].append(e - s)
    print("  half tiles' share by tenths: " + " ".join(f"{h / (f + h):.2f}" if f + h else "-" for f, h in half_time))
    for kind in ("L1", "L2"):
        for h in (0, 1):
            med = [starts.get((kind, h, b)) for b in range(TENTHS)]
            print(f"  {kind} {'half' if h else 'full'} median us by tenths: " +
                  " ".join(f"{st.median(m) / 1e3:.1f}" if m else "-" for m in med))
