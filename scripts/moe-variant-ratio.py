#!/usr/bin/env python3
"""A bench_moe variant against the default, from one run's moe.csv (the device calls' table since s29).

    python3 scripts/moe-variant-ratio.py DIR/moe.csv _l0      # --compare-lean's backend suffix

Per configuration and fused order: the default's median ms, its fraction of the cuBLASLt ceiling measured in the same
run, time_variant / time (> 1: the default is faster) and whether that ratio flipped between the ABBA halves (known
where the default order is the run's fused backend, else n/a); then the geomean, min and max per order, precision and
token count. Exits 1 when a configuration has no row of the variant."""
import csv
import math
import sys


def main(path, suffix):
    rows = list(csv.DictReader(open(path)))
    cfg = lambda r: (r['shape'], r['precision'], r['tokens'], r['routing'])
    ceil = {cfg(r): float(r['tflops']) for r in rows if r['backend'] == 'ceiling'}
    by = {cfg(r) + (r['backend'],): r for r in rows}
    # bench_moe's `flipped` of a backend is the order check of its ratio against the row's fused backend (the one
    # whose own flag is -1): it checks time_variant / time only where the variant's default order is that backend
    fused = {cfg(r): r['backend'] for r in rows if r['backend'].startswith('fused') and r['flipped'] == '-1'}
    groups = {}
    for (sh, pr, T, rt, b), r in sorted(by.items()):
        if b not in ('fused_wave', 'fused_interleaved'):
            continue
        v = by.get((sh, pr, T, rt, b + suffix))
        if v is None:
            sys.exit(f'moe-variant-ratio: no backend {b + suffix} for {sh} {pr} {T} {rt} in {path}')
        t, tv = float(r['median_ms']), float(v['median_ms'])
        f = fused.get((sh, pr, T, rt))
        flip = {'0': 'no', '1': 'YES'}.get(v['flipped'], v['flipped']) if f == b else f'n/a (checked against {f})'
        print(f"{sh:18s} {pr} {T:>5s} {rt:8s} {b:18s} {t:7.3f} ms frac {float(r['tflops']) / ceil[(sh, pr, T, rt)]:.3f} "
              f"time{suffix}/time {tv / t:.3f} flip {flip}")
        groups.setdefault((b, pr, T), []).append(tv / t)
    for k, v in sorted(groups.items()):
        g = math.exp(sum(map(math.log, v)) / len(v))
        print(k, 'geomean %.3f min %.3f max %.3f' % (g, min(v), max(v)))


if __name__ == '__main__':
    if sys.argv[1:] in (['-h'], ['--help']):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) != 3:
        sys.exit('usage: moe-variant-ratio.py MOE_CSV BACKEND_SUFFIX (e.g. _l0)')
    main(sys.argv[1], sys.argv[2])
