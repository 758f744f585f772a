"""s70: from bench_moe --trace-csv records, how far apart in time the row pairs of an expert start the same weight tile.
For every (kind, expert, N tile) read by more than one row pair (rows // 2), the start times of the row pairs' first
tile on it, sorted; the lag is the gap between consecutive ones. Prints the lags' quantiles for Linear-1 and Linear-2,
and how many fall within 18 us (the time a 50 MB L2 turns over at 2.75 TB/s).
    python3 tile_lags.py tiles.csv[.gz]"""
import collections
import csv
import gzip
import sys

path = sys.argv[1]
f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
rows = list(csv.DictReader(f))
row0 = {}  # expert -> its first row (the pairs are rows b, b + 1 with b even from there)
for r in rows:
    e = int(r["expert"])
    row0[e] = min(row0.get(e, 1 << 30), int(r["row"]))
first = collections.defaultdict(dict)  # (kind, expert, n) -> row pair -> earliest mainloop start (ns)
for r in rows:
    e = int(r["expert"])
    key = (r["kind"], e, int(r["n"]))
    rp = (int(r["row"]) - row0[e]) // 2
    t = int(r["mma_start_ns"])
    if t > 0 and (rp not in first[key] or t < first[key][rp]):
        first[key][rp] = t
for kind in sorted({k[0] for k in first}):
    lags = []
    for key, d in first.items():
        if key[0] != kind or len(d) < 2:
            continue
        ts = sorted(d.values())
        lags += [(b - a) / 1e3 for a, b in zip(ts, ts[1:])]
    if not lags:
        print(f"  {kind}: no weight tile read by two row pairs")
        continue
    lags.sort()
    q = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]
    near = sum(x <= 18.0 for x in lags)
    print(f"  {kind}: {len(lags)} lags between row pairs on one weight tile: median {q(0.5):.1f} us, "
          f"p10 {q(0.1):.1f}, p90 {q(0.9):.1f}; within 18 us: {near} ({100 * near / len(lags):.0f} %)")
