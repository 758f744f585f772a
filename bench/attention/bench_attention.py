#!/usr/bin/env python3
"""Attention forward benchmark: xstage's sm_90a kernel against torch SDPA (cuDNN and flash backends),
same inputs, one process, one device call.

Grid: B = 1, bf16, non-causal; D = 128 with heads {3, 6, 12, 24, 40} x S {4K, 8K, 16K, 32K, 64K};
D = 64 with heads {12, 24} x S {4K, 8K, 16K, 32K}. `--quick`: three small shapes.

Method (per shape): `--warmup` rounds, then `--reps` rounds; in each round every backend makes one
call between two CUDA events, the backends taking turns in an order that rotates every round (so a
drift of the GPU clock during the run hits all backends alike); the median per backend is reported. Before the timed calls a GPU sleep kernel is queued that outlasts the host's
enqueueing of all reps, so host overhead (Python, torch dispatch) never shows as GPU idle time inside
a timed region. Inputs rotate over enough (q, k, v) sets to total >= 2x the L2 size (at most 8 sets),
so a call never finds its inputs in L2 from the previous call. SDPA takes (B, H, S, D): it gets
transposed views of the same (B, S, H, D) tensors, made before timing (no copies in our code).
If a shape's rounds would take more than `--budget-s` seconds, its reps drop (not below 5); the
`reps` column says how many were taken.

TFLOP/s = 4 * B * H * S^2 * D / t (two GEMMs of 2*S*S*D flops per head; non-causal).
Check: our output against cuDNN's, once per shape, on the first input set:
max|ours - cudnn| <= 2^-5 * max|cudnn| (8 bf16 ulps at the largest output magnitude); a miss sets
`wrong` = 1 and the program exits 1 after writing its files.

Output: CSV on stdout ('#' header), then a table; with --out DIR: DIR/attention.csv and DIR/summary.json
(min_ratio_vs_cudnn_large: D = 128, S >= 8K, heads >= 12; min_ratio_vs_cudnn_all; median_ratio_vs_cudnn;
machine; command). If our kernel reports an error the benchmark still runs SDPA and reports
"ours: unsupported" (ratios null).
"""
import argparse
import json
import math
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

K = 1024
FULL_GRID = ([(128, h, s) for s in (4 * K, 8 * K, 16 * K, 32 * K, 64 * K) for h in (3, 6, 12, 24, 40)] +
             [(64, h, s) for s in (4 * K, 8 * K, 16 * K, 32 * K) for h in (12, 24)])
QUICK_GRID = [(128, 12, 4 * K), (128, 24, 8 * K), (64, 12, 4 * K)]
COLUMNS = ["dtype", "batch", "heads", "seqlen", "head_dim", "causal", "reps",
           "ours_ms", "cudnn_ms", "flash_ms", "ours_tflops", "cudnn_tflops", "flash_tflops",
           "ratio_vs_cudnn", "ratio_vs_flash", "max_abs_diff", "tol", "wrong", "ours_status"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="three small shapes (a dry run)")
    ap.add_argument("--out", type=Path, help="write attention.csv and summary.json here")
    ap.add_argument("--reps", type=int, default=20, help="timed rounds per shape (every backend once per round); median reported")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=20.0, help="time cap per shape for the timed rounds (all backends)")
    ap.add_argument("--lib", type=Path, help="libxstage_attention.so (default: $XSTAGE_ATTENTION_LIB, then build/)")
    ap.add_argument("--seed", type=int, default=1234)
    return ap.parse_args()


def main():
    args = parse_args()
    if args.lib:
        os.environ["XSTAGE_ATTENTION_LIB"] = str(args.lib.resolve())
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from xstage import attention as xa

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2_bytes = getattr(props, "L2_cache_size", 64 << 20)
    clock_hz = getattr(props, "clock_rate", 1_980_000) * 1e3  # kHz; only sizes the sleep kernel
    machine = f"{torch.cuda.get_device_name(dev)} x{torch.cuda.device_count()}"
    command = "python3 " + " ".join(shlex.quote(a) for a in sys.argv)
    grid = QUICK_GRID if args.quick else FULL_GRID
    print(f"# xstage attention benchmark on {machine}; torch {torch.__version__}; "
          f"library {xa.library_path()}", flush=True)

    def time_interleaved(fns):
        """Median ms per backend over reps of fns[name](i) (i selects the input set), and the reps taken.

        The backends take turns inside each round (the order rotates every round), so a drift of the GPU
        clock during the run lands on all of them alike instead of on whichever ran last."""
        names = list(fns)
        t0 = time.perf_counter()
        for i in range(args.warmup):
            for n in names:
                fns[n](i)
        host_per_call = (time.perf_counter() - t0) / max(1, args.warmup * len(names))  # enqueue bound
        est_s = 0.0
        for n in names:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fns[n](0)
            e1.record()
            torch.cuda.synchronize()
            est_s += e0.elapsed_time(e1) / 1e3
        reps = args.reps if est_s * args.reps <= args.budget_s else min(args.reps, max(5, int(args.budget_s / est_s)))
        ev = {n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)] for n in names}
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(int(min(0.2, 2.0 * reps * len(names) * host_per_call + 1e-3) * clock_hz))
        for i in range(reps):
            for j in range(len(names)):
                n = names[(i + j) % len(names)]
                ev[n][i][0].record()
                fns[n](i)
                ev[n][i][1].record()
        torch.cuda.synchronize()
        return {n: (statistics.median(a.elapsed_time(b) for a, b in ev[n]), reps) for n in names}

    rows = []
    ours_status_all = set()
    for dim, heads, seqlen in grid:
        batch = 1
        gen = torch.Generator(device=dev).manual_seed(args.seed + 7 * seqlen + heads + dim)
        set_bytes = 3 * batch * seqlen * heads * dim * 2
        n_sets = max(1, min(8, math.ceil(2 * l2_bytes / set_bytes)))
        shape = (batch, seqlen, heads, dim)
        sets = [tuple(torch.randn(shape, generator=gen, device=dev, dtype=torch.bfloat16) for _ in range(3))
                for _ in range(n_sets)]
        sets_t = [tuple(t.transpose(1, 2) for t in s) for s in sets]  # (B, H, S, D) views, no copies
        out = torch.empty(shape, device=dev, dtype=torch.bfloat16)
        scale = 1.0 / math.sqrt(dim)
        flops = 4.0 * batch * heads * seqlen * seqlen * dim
        row = dict(dtype="bf16", batch=batch, heads=heads, seqlen=seqlen, head_dim=dim, causal=0)

        # Ours: one checked call first; an error makes the row "unsupported" but the run goes on.
        ours_status = "ok"
        try:
            xa.flash_attn_fwd(*sets[0], softmax_scale=scale, out=out)
            torch.cuda.synchronize()
        except xa.XstageError as e:
            ours_status = f"unsupported: {e}"
        ours_status_all.add(ours_status.split(":")[0])

        # One untimed call per SDPA backend: availability, and cuDNN's output as the reference.
        fns = {}
        ref = None
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            def sdpa(i, backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(*sets_t[i % n_sets], scale=scale)
            try:
                o = sdpa(0)
                torch.cuda.synchronize()
                if ref is None:
                    ref = o.transpose(1, 2)  # (B, S, H, D), the reference for our check
                fns[name] = sdpa
            except RuntimeError as e:
                print(f"# {name} unavailable at D={dim} H={heads} S={seqlen}: {str(e).splitlines()[0]}", flush=True)

        diff = tol = None
        wrong = 0
        if ours_status == "ok":
            if ref is not None:
                diff = (out.float() - ref.float()).abs().max().item()  # NaN propagates through max
                tol = 2.0 ** -5 * ref.float().abs().max().item()
                wrong = int(not (diff <= tol))
            fns["ours"] = lambda i: xa.flash_attn_fwd(*sets[i % n_sets], softmax_scale=scale, out=out)
        results = time_interleaved(fns) if fns else {}

        def ms(k):
            return results[k][0] if k in results else None

        def tf(k):
            return flops / (ms(k) * 1e-3) / 1e12 if k in results else None

        row.update(reps=min(r for _, r in results.values()) if results else 0,
                   ours_ms=ms("ours"), cudnn_ms=ms("cudnn"), flash_ms=ms("flash"),
                   ours_tflops=tf("ours"), cudnn_tflops=tf("cudnn"), flash_tflops=tf("flash"),
                   ratio_vs_cudnn=tf("ours") / tf("cudnn") if "ours" in results and "cudnn" in results else None,
                   ratio_vs_flash=tf("ours") / tf("flash") if "ours" in results and "flash" in results else None,
                   max_abs_diff=diff, tol=tol, wrong=wrong, ours_status=ours_status)
        rows.append(row)
        print(f"# D={dim} H={heads} S={seqlen}: " + ", ".join(
            f"{k} {results[k][0]:.3f} ms" for k in ("ours", "cudnn", "flash") if k in results)
            + ("" if ours_status == "ok" else f"; ours: {ours_status}")
            + ("  MISMATCH" if wrong else ""), flush=True)
        del sets, sets_t, out, ref
        torch.cuda.empty_cache()

    def fmt(x):
        return "" if x is None else (f"{x:.6g}" if isinstance(x, float) else str(x))

    csv = ["# " + ",".join(COLUMNS)] + [",".join(fmt(r[c]).replace(",", ";") for c in COLUMNS) for r in rows]

    ratios = [r["ratio_vs_cudnn"] for r in rows if r["ratio_vs_cudnn"] is not None]
    large = [r["ratio_vs_cudnn"] for r in rows if r["ratio_vs_cudnn"] is not None
             and r["head_dim"] == 128 and r["seqlen"] >= 8 * K and r["heads"] >= 12]
    n_wrong = sum(r["wrong"] for r in rows)
    summary = dict(
        min_ratio_vs_cudnn_large=min(large) if large else None,
        min_ratio_vs_cudnn_all=min(ratios) if ratios else None,
        median_ratio_vs_cudnn=statistics.median(ratios) if ratios else None,
        machine=machine, command=command, torch=torch.__version__,
        reps_requested=args.reps, reps_min_taken=min((r["reps"] for r in rows), default=0),
        warmup=args.warmup, rows=len(rows), wrong=n_wrong,
        ours_status="ok" if ours_status_all == {"ok"} else "unsupported" if ours_status_all == {"unsupported"}
        else "mixed",
    )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "attention.csv").write_text("\n".join(csv) + "\n")
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    print("\n".join(csv))
    print()
    print(f"{'D':>4} {'H':>3} {'S':>6} {'reps':>4} {'ours TF/s':>10} {'cuDNN TF/s':>10} {'flash TF/s':>10} "
          f"{'ours/cuDNN':>10} {'max|diff|':>10}  check")
    for r in rows:
        def c(x, f="{:10.1f}"):
            return f.format(x) if x is not None else f"{'-':>10}"
        check = ("unsupported" if r["ours_status"] != "ok" else "MISMATCH" if r["wrong"] else "ok")
        print(f"{r['head_dim']:>4} {r['heads']:>3} {r['seqlen']:>6} {r['reps']:>4} {c(r['ours_tflops'])} "
              f"{c(r['cudnn_tflops'])} {c(r['flash_tflops'])} {c(r['ratio_vs_cudnn'], '{:10.3f}')} "
              f"{c(r['max_abs_diff'], '{:10.2e}')}  {check}")
    s = summary
    print(f"ratio vs cuDNN: large (D=128, S>=8K, H>=12) min {fmt(s['min_ratio_vs_cudnn_large']) or '-'}, "
          f"all min {fmt(s['min_ratio_vs_cudnn_all']) or '-'}, median {fmt(s['median_ratio_vs_cudnn']) or '-'}; "
          f"reps {s['reps_min_taken']}..{args.reps} (median); ours: {s['ours_status']}; wrong rows: {n_wrong}")
    return 1 if n_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
