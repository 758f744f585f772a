"""CPU test of bench/attention/bench_attention.py: its pure helpers, and two --dry-run runs (fake
sleep-based backends, wall-clock timer, no torch) that must write attention.csv, summary.json and
attention_blocks.json with the documented keys. Exits non-zero on failure.

    python3 tests/bench/check_attention_dry_run.py bench/attention/bench_attention.py OUTDIR
"""
import csv
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

script, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
spec = importlib.util.spec_from_file_location("bench_attention", script)
ba = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ba)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


# --- pure helpers ---
S, K = ba.Shape, ba.K
expect(ba.parse_shapes("128:24:32K:c,64:12:4096") == [S(128, 24, 32 * K, True), S(64, 12, 4096, False)], "parse_shapes")
expect(ba.parse_shapes("128:3:8k:n") == [S(128, 3, 8 * K, False)], "parse_shapes n")
for bad in ("128:24", "128:24:8K:x", "0:0:0", "128:x:4K", "128:24:1.5K"):
    try:
        ba.parse_shapes(bad)
        failures.append(f"parse_shapes accepted {bad}")
    except ValueError:
        pass
expect(ba.flops(S(128, 8, 16 * K, True)) == 2.0 * 8 * (16 * K) ** 2 * 128, "causal flops = 2 B H S^2 D")
expect(ba.flops(S(128, 8, 16 * K, False)) == 4.0 * 8 * (16 * K) ** 2 * 128, "non-causal flops = 4 B H S^2 D")
w, b, est = ba.plan_shape(S(128, 12, 4 * K, False), 4, 0.2, 0.4, 2, 4.8, 3)
expect(abs(w - 0.1) < 1e-12 and abs(b - 0.2) < 1e-12, f"plan_shape budget scaling: {w}, {b}")
w, b, est = ba.plan_shape(S(128, 40, 64 * K, False), 3, 0.2, 0.4, 2, 100, 3)
expect(w == 0.2 and b == 0.4 and est > 12 * (0.2 + 0.4), "plan_shape: slow calls lengthen the estimate")
full = ba.FULL_GRID
expect(len(full) == len(set(full)) == 43, f"full grid: {len(full)} shapes")
expect(sum(s.causal for s in full) == 8, "full grid: 8 causal rows")
expect(S(64, 3, 4 * K, False) in full and S(64, 12, 32 * K, True) in full and S(128, 24, 64 * K, True) in full, "grid rows")
expect(len(ba.QUICK_GRID) == 4 and sum(s.causal for s in ba.QUICK_GRID) == 1, "quick grid")
est_full = sum(ba.plan_shape(s, 4, 0.2, 0.4, 2, 10.0, 3)[2] for s in full)
expect(est_full < 8.5 * 60, f"full grid with --lib-before estimated {est_full:.0f} s > 8.5 min")

# argument errors: one argparse line naming the flag and value, exit 2, for values NaN slips past
for args, fragment in ((["--block-s", "nan"], "--block-s nan"), (["--warmup-s", "nan"], "--warmup-s nan"),
                       (["--block-s", "inf"], "--block-s inf"), (["--min-calls", "-5"], "--min-calls -5"),
                       (["--budget-s", "nan"], "--budget-s nan"), (["--shapes", "0:0:0"], "must be positive")):
    p = subprocess.run([sys.executable, str(script), "--dry-run", *args], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 2 and fragment in p.stderr and "Traceback" not in p.stderr, f"{args}: {p.stderr[-300:]}")

SUMMARY_KEYS = {"protocol", "min_ratio_vs_cudnn_all", "median_ratio_vs_cudnn", "min_ratio_vs_cudnn_causal",
                "min_ratio_vs_cudnn_noncausal_16k", "min_ratio_vs_cudnn_causal_16k", "attention_ratio_after_vs_before",
                "attention_ratio_after_vs_before_min", "attention_ratio_after_vs_before_max", "machine", "command",
                "date", "torch", "rows", "wrong", "ratio_vs_cudnn_flipped_rows", "ratio_after_vs_before_flipped_rows"}


def run(args, outdir):
    p = subprocess.run([sys.executable, str(script), "--dry-run", "--out", str(outdir), *args],
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"dry run {args} exited {p.returncode}: {p.stderr[-2000:]}")
    expect("estimated total" in p.stdout, "estimate printed")
    summary = json.loads((outdir / "summary.json").read_text())
    lines = (outdir / "attention.csv").read_text().splitlines()
    header = lines[0].lstrip("# ").split(",")
    rows = list(csv.DictReader(lines[1:], fieldnames=header))
    blocks = json.loads((outdir / "attention_blocks.json").read_text())
    return p.stdout, summary, header, rows, blocks


# --- with a 'before' build: all four backends, all summary keys non-null ---
stdout, s, header, rows, blocks = run(["--lib-before", "dry"], out / "with-before")
missing = SUMMARY_KEYS - set(s)
expect(not missing, f"summary.json lacks {sorted(missing)}")
expect(s["complete"] is True and s["rows"] == 4 and s["wrong"] == 0, "summary rows/wrong/complete")
for k in SUMMARY_KEYS - {"torch"}:
    expect(s.get(k) is not None, f"summary {k} is null")
expect(s["protocol"].startswith("xstage-steady-state/1"), "protocol string")
# (the dry backends are wall-timed host work: on a loaded 2-core runner their ratio is whatever the load makes it,
# so only that it is a real, positive number is asserted, not how near 1 it falls)
expect(math.isfinite(s["attention_ratio_after_vs_before"]) and s["attention_ratio_after_vs_before"] > 0,
       f"after/before {s['attention_ratio_after_vs_before']}")
expect(s["attention_ratio_after_vs_before_min"] <= s["attention_ratio_after_vs_before"] <= s["attention_ratio_after_vs_before_max"],
       "after/before min <= geomean <= max")
expect(header == ba.COLUMNS, "CSV header")
for col in ("xstage_ms", "cudnn_ms", "flash_ms", "xstage_before_ms", "xstage_spread", "ratio_vs_cudnn",
            "ratio_vs_cudnn_first", "ratio_vs_cudnn_second", "ratio_after_vs_before", "xstage_tflops"):
    expect(all(r[col] not in ("", None) for r in rows), f"CSV column {col} empty")
expect(all(r["xstage_sm_mhz"] == "" for r in rows), "no NVML here: clock columns empty")
expect(sum(r["causal"] == "1" for r in rows) == 1, "one causal row in the dry grid")
for r in rows:  # TFLOP/s = flops / median time; causal halves the flops
    shape = S(int(r["head_dim"]), int(r["heads"]), int(r["seqlen"]), r["causal"] == "1")
    tf = ba.flops(shape) / (float(r["xstage_ms"]) * 1e-3) / 1e12
    expect(abs(tf / float(r["xstage_tflops"]) - 1) < 1e-4, f"tflops of {shape}")
    expect(abs(float(r["cudnn_ms"]) / float(r["xstage_ms"]) / float(r["ratio_vs_cudnn"]) - 1) < 1e-4, "ratio = cudnn/xstage")
expect(len(blocks) == 4, "blocks json: one entry per shape")
res = blocks[0]["result"]
expect(res["order"] == ["xstage", "cudnn", "flash", "xstage_before", "xstage_before", "flash", "cudnn", "xstage"] * 2,
       f"block order {res['order']}")
expect(len(res["blocks"]) == 16 and all(b["calls"] >= 3 for b in res["blocks"]), "16 blocks, >= 3 calls each")

# --- custom shapes, no before build: after/before null ---
stdout, s, header, rows, blocks = run(["--shapes", "64:3:4K,128:24:16K:c", "--rounds", "1"], out / "no-before")
expect(s["rows"] == 2 and s["attention_ratio_after_vs_before"] is None, "no --lib-before: after/before null")
expect(all(r["xstage_before_ms"] == "" for r in rows), "no before column values")
expect(blocks[1]["result"]["order"] == ["xstage", "cudnn", "flash", "flash", "cudnn", "xstage"], "ABCCBA")
expect(s["min_ratio_vs_cudnn_causal_16k"] is not None and s["min_ratio_vs_cudnn_noncausal_16k"] is None,
       "16K subsets: one causal S=16K row, no non-causal S>=16K row")

for f in failures:
    print("FAIL", f)
print(f"attention dry run: {'FAILED' if failures else 'ok'} ({len(failures)} failures)")
sys.exit(1 if failures else 0)
