#!/usr/bin/env python3
"""CPU test of scripts/moe-variant-ratio.py (a bench_moe --compare-* variant against the default, from one moe.csv;
the device scripts read their results through it): ratios, flips and the geomean on a synthetic moe.csv, and the
exit with a message when a configuration has no row of the variant."""
import csv
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts",
                      "moe-variant-ratio.py")
FIELDS = ["shape", "hidden", "inter", "experts", "topk", "tokens", "routing", "precision", "flops", "backend",
          "median_ms", "min_ms", "max_ms", "spread", "tflops", "ratio_vs_fused", "flipped", "j_per_call",
          "sm_clock_mhz"]


def rows(shape, routing, default_ms, variant_ms, flipped, ceil_tflops=1000.0, suffix="_pz", precision="w8a8",
         fused="fused_interleaved"):
    base = {"shape": shape, "hidden": 7168, "inter": 3072, "experts": 384, "topk": 6, "tokens": 8192,
            "routing": routing, "precision": precision, "flops": 6.5e12, "min_ms": 0, "max_ms": 0, "spread": 0.01,
            "ratio_vs_fused": 1, "j_per_call": 5, "sm_clock_mhz": 1700}
    out = []
    # bench_moe writes `flipped` as 1 / 0 against the row's fused backend, -1 on the fused backend itself
    for b, ms, tf, fl in (("fused_interleaved", default_ms, 500.0, "-1" if fused == "fused_interleaved" else "0"),
                          ("fused_interleaved" + suffix, variant_ms, 480.0, flipped),
                          ("fused_wave", default_ms, 500.0, "-1" if fused == "fused_wave" else "0"),
                          ("fused_wave" + suffix, variant_ms, 480.0, "0"),
                          ("ceiling", 5.0, ceil_tflops, "0")):
        r = dict(base, backend=b, median_ms=ms, tflops=tf, flipped=fl)
        out.append(r)
    return out


def fail(what):
    sys.exit("check_variant_ratio: FAILED: " + what)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "moe.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            for r in (rows("deepseek-v4-pro", "balanced", 10.0, 9.0, "0") + rows("deepseek-v4-pro", "skewed", 10.0, 12.5, "1")
                      # the other precision of the same shape: its own rows, not overwriting the W8A8 ones
                      + rows("deepseek-v4-pro", "balanced", 20.0, 30.0, "0", precision="w4a8", fused="fused_wave")):
                w.writerow(r)
        p = subprocess.run([sys.executable, SCRIPT, path, "_pz"], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"rc {p.returncode}: {p.stderr}")
        lines = p.stdout.splitlines()
        line = lambda *words: [l for l in lines if all(w in l for w in words)]
        bal = line("w8a8", "balanced", "fused_interleaved ")
        skw = line("w8a8", "skewed", "fused_interleaved ")
        if len(bal) != 1 or "time_pz/time 0.900" not in bal[0] or "frac 0.500" not in bal[0] or "flip no" not in bal[0]:
            fail(f"balanced line: {bal}")  # 9 / 10; the default's 500 TFLOP/s against the ceiling's 1000
        if len(skw) != 1 or "time_pz/time 1.250" not in skw[0] or "flip YES" not in skw[0]:
            fail(f"skewed line: {skw}")
        wave = line("w8a8", "skewed", "fused_wave ")  # its flag was checked against fused_interleaved, not fused_wave
        if len(wave) != 1 or "flip n/a (checked against fused_interleaved)" not in wave[0]:
            fail(f"a flag of another pair is not shown as this ratio's: {wave}")
        w4 = line("w4a8", "balanced", "fused_wave ")
        if len(w4) != 1 or "time_pz/time 1.500" not in w4[0] or "flip no" not in w4[0]:
            fail(f"the W4A8 rows are their own: {w4}")
        g = [l for l in lines if l.startswith("('fused_interleaved', 'w8a8', '8192')")]
        want = (0.9 * 1.25) ** 0.5
        if not g or f"geomean {want:.3f} min 0.900 max 1.250" not in g[0]:
            fail(f"geomean line: {g} (want {want:.3f})")
        p = subprocess.run([sys.executable, SCRIPT, path, "_ps"], capture_output=True, text=True)
        if p.returncode == 0 or "no backend fused_interleaved_ps" not in p.stderr:
            fail(f"a missing variant is not refused: rc {p.returncode}, {p.stderr!r}")
    print("check_variant_ratio: all checks passed")


if __name__ == "__main__":
    main()
