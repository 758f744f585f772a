#!/usr/bin/env python3
"""Reads the producer's stage records of a traced fused MoE launch (XSTAGE_STAGE_REC, stage-rec.patch) and prints,
per stage kind, where a pipeline stage's round trip goes (cycles and microseconds at --ghz):

  issue     t1 - t0: the producer's work from the free stage to its last load issued
  a         ta - t0: to the A box and A scales issued (the weights' loads follow; records with 8 words)
  pending   issued stages whose full completion the polls had not seen when this one's A was issued
  expect    the full barrier's arrive.expect_tx, from t0 (records with 10 words)
  aload     the A box's load(s), after the expect_tx
  ascale    the A scales' load, after the A box
  wload     the weights' load(s), after the A scales
  load      full completion - t1 (only where polls bracket the completion to --tol cycles: the producer was waiting
            for a later stage then; 'upper' counts the rest, whose first poll found the stage already full)
  consumer  t0(u + S) - full(u): from the stage's data in shared memory to the producer holding the slot again
            (the consumers' wait for it, their batches, the release in both CTAs of a pair, the producer's wake-up)
  trip      t0(u + S) - t1(u)
  interval  t1(u + 1) - t1(u): the producer's pace, one stage per interval
  empty     t0 - ws: the producer's wait for the free stage (0 when the ring was not full)

usage: stage_rec.py FILE.bin [FILE.bin ...] [--ghz 1.75] [--stages 4] [--tol 400]
"""
import argparse
import struct
import sys

import numpy as np


def load(path):
    with open(path, "rb") as f:
        ctas, uses, words = struct.unpack("3i", f.read(12))
        a = np.frombuffer(f.read(), dtype=np.uint64)
    if a.size != ctas * uses * words:
        raise SystemExit(f"{path}: {a.size} words, expected {ctas} x {uses} x {words}")
    return a.reshape(ctas, uses, words).astype(np.int64)


def kinds(info):
    valid = (info >> 16) & 0x3FF
    l2 = (info >> 29) & 1
    half = valid <= 64
    return np.where(l2 == 1, np.where(half, "L2 half", "L2 full"), np.where(half, "L1 half", "L1 full"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--ghz", type=float, default=1.75)
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--tol", type=int, default=400)
    a = ap.parse_args()
    S = a.stages
    for path in a.files:
        r = load(path)
        rows = {k: [] for k in ("issue", "a", "pending", "expect", "aload", "ascale", "wload", "load", "consumer", "trip",
                                "interval", "empty")}
        kind_of = []
        upper = 0
        for c in range(r.shape[0]):
            x = r[c]
            n = int(np.count_nonzero(x[:, 2]))
            if n < S + 2:
                continue
            x = x[:n]
            ws, t0, t1, flo, fhi, info = (x[:, i] for i in range(6))
            ta = x[:, 6] if x.shape[1] > 6 else np.zeros(n, np.int64)
            pend = x[:, 7] if x.shape[1] > 7 else np.zeros(n, np.int64)
            c8 = x[:, 8] if x.shape[1] > 9 else np.zeros(n, np.int64)
            c9 = x[:, 9] if x.shape[1] > 9 else np.zeros(n, np.int64)
            k = kinds(info)
            exact = (fhi > 0) & (flo >= t1) & (fhi - flo <= a.tol)
            upper += int(np.count_nonzero((fhi > 0) & ~exact))
            full = np.where(exact, (flo + fhi) // 2, -1)
            for u in range(n - S):
                kind_of.append(k[u])
                rows["issue"].append(t1[u] - t0[u])
                rows["a"].append(ta[u] - t0[u] if ta[u] > 0 else np.nan)
                rows["pending"].append(pend[u] if ta[u] > 0 else np.nan)
                fine = c8[u] > 0 and c9[u] > 0 and ta[u] > 0
                rows["expect"].append(c8[u] - t0[u] if fine else np.nan)
                rows["aload"].append(c9[u] - c8[u] if fine else np.nan)
                rows["ascale"].append(ta[u] - c9[u] if fine else np.nan)
                rows["wload"].append(t1[u] - ta[u] if fine else np.nan)
                rows["load"].append(full[u] - t1[u] if full[u] >= 0 else np.nan)
                rows["consumer"].append(t0[u + S] - full[u] if full[u] >= 0 else np.nan)
                rows["trip"].append(t0[u + S] - t1[u])
                rows["interval"].append(t1[u + 1] - t1[u])
                rows["empty"].append(t0[u] - ws[u])
        kind_of = np.array(kind_of)
        print(f"{path}: {len(kind_of)} stage uses of {r.shape[0]} CTAs, load bracketed on "
              f"{int(np.count_nonzero(~np.isnan(np.array(rows['load'], dtype=float))))}, upper bound only on {upper}; "
              f"cycles (us at {a.ghz} GHz): median [p10, p90]")
        for kd in ("L1 full", "L1 half", "L2 full", "L2 half", "all"):
            m = kind_of == kd if kd != "all" else np.ones(len(kind_of), bool)
            if not m.any():
                continue
            cells = []
            for name, v in rows.items():
                v = np.array(v, dtype=float)[m]
                v = v[~np.isnan(v)]
                if v.size == 0:
                    cells.append(f"{name} -")
                    continue
                p10, p50, p90 = np.percentile(v, [10, 50, 90])
                if name == "pending":
                    cells.append(f"{name} {v.mean():.2f}")
                else:
                    cells.append(f"{name} {p50:.0f} ({p50 / a.ghz / 1e3:.2f}) [{p10:.0f}, {p90:.0f}]")
            print(f"  {kd:8s} n={int(m.sum()):6d}  " + "  ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
