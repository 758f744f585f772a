#!/usr/bin/env python3
"""Attention forward benchmark: xstage's sm_90a kernel against torch SDPA (cuDNN and FlashAttention-2
backends), optionally against a second xstage build (--lib-before), same inputs, one process.

Method: the project's benchmark protocol (docs/BENCHMARKING.md, python/xstage/bench_protocol.py). Per
shape, per backend: its own warm-up (--warmup-s of back-to-back calls), then a steady-state block
(--block-s of back-to-back calls between two CUDA events, or CUDA-graph replays with --graph); blocks
in balanced order (xstage cudnn flash [xstage_before], then the reverse), --rounds times; inputs rotate
per call over enough (q, k, v) sets to exceed 2x L2. Per backend: median per-call time over its blocks
and the spread (max - min) / median; ratio vs cuDNN = cuDNN time / xstage time (the TFLOP/s ratio),
also from the first-half blocks only (listed order) and the second-half blocks only (reverse order).
SM clock and power (NVML, read-only) are sampled beside every block. --budget-s caps a shape's planned
time (warm-up and block shrink together); the estimated total is printed at the start.

Grid (B = 1, bf16): non-causal D = 128 heads {3, 6, 12, 24, 40} x S {4K, 8K, 16K, 32K, 64K}; D = 64
heads {12, 24} x S {4K .. 32K} and heads 3 x S {4K, 8K}; causal D = 128 heads {8, 24} x S {16K, 32K,
64K}, D = 64 heads 12 x S {16K, 32K}. --quick: 4 shapes (one causal). --shapes D:H:S[:c],... custom.

TFLOP/s = 4 B H S^2 D / t (non-causal), 2 B H S^2 D / t (causal: half the score matrix).
Check (per shape, first input set): max|ours - cudnn| <= 2^-5 max|cudnn| for xstage and xstage_before;
a miss sets wrong / before_wrong and the program exits 1 after writing its files.

Output: CSV on stdout ('#' header) and a table; with --out DIR: DIR/attention.csv, DIR/summary.json,
DIR/attention_blocks.json (every block of every shape), rewritten after every shape (summary's
"complete" turns true at the end). --dry-run: fake sleep-based backends and a wall-clock timer on the
CPU (no torch, no GPU), the same code paths for rows, summary and files.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import shlex
import statistics
import sys
import time
from collections import namedtuple
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
from xstage import bench_protocol as bp  # noqa: E402  (no torch at import)

K = 1024
Shape = namedtuple("Shape", "head_dim heads seqlen causal")
FULL_GRID = ([Shape(128, h, s, False) for s in (4 * K, 8 * K, 16 * K, 32 * K, 64 * K) for h in (3, 6, 12, 24, 40)]
             + [Shape(64, h, s, False) for s in (4 * K, 8 * K, 16 * K, 32 * K) for h in (12, 24)]
             + [Shape(64, 3, s, False) for s in (4 * K, 8 * K)]
             + [Shape(128, h, s, True) for s in (16 * K, 32 * K, 64 * K) for h in (8, 24)]
             + [Shape(64, 12, s, True) for s in (16 * K, 32 * K)])
QUICK_GRID = [Shape(128, 24, 8 * K, False), Shape(128, 12, 16 * K, False), Shape(64, 12, 4 * K, False),
              Shape(128, 8, 16 * K, True)]
BACKENDS = ("xstage", "cudnn", "flash", "xstage_before")  # protocol order (forward half)
ASSUMED_TFLOPS = 450.0  # only for the time estimate printed at the start
SETUP_S = 0.5           # per shape: inputs, checks (estimate)
COLUMNS = (["dtype", "batch", "heads", "seqlen", "head_dim", "causal", "n_inputs", "warmup_s", "block_s", "rounds"]
           + [f"{b}_ms" for b in BACKENDS] + [f"{b}_spread" for b in BACKENDS] + [f"{b}_tflops" for b in BACKENDS]
           + ["ratio_vs_cudnn", "ratio_vs_cudnn_first", "ratio_vs_cudnn_second", "ratio_vs_flash",
              "ratio_after_vs_before", "ratio_after_vs_before_first", "ratio_after_vs_before_second",
              "before_ratio_vs_cudnn"]
           + [f"{b}_sm_mhz" for b in BACKENDS] + [f"{b}_power_w" for b in BACKENDS]
           + ["host_bound", "max_abs_diff", "tol", "wrong", "before_max_abs_diff", "before_wrong", "xstage_status"])


# ----------------------------------------------------------------------------------------------------------
# Pure helpers (tested on the CPU by tests/bench/check_attention_dry_run.py through the dry run)

def parse_shapes(text: str) -> list[Shape]:
    """'D:H:S[:c]' comma-separated; S may end in K (x1024); a 4th field c/causal/1 means causal."""
    out = []
    for item in text.split(","):
        f = [x.strip() for x in item.strip().split(":")]
        if len(f) not in (3, 4):
            raise ValueError(f"shape '{item}': expected D:H:S or D:H:S:c")
        s = f[2].upper()
        try:
            seqlen = int(s[:-1]) * K if s.endswith("K") else int(s)
            dim, heads = int(f[0]), int(f[1])
        except ValueError:
            raise ValueError(f"shape '{item}': D, H and S must be whole numbers (S may end in K)") from None
        if min(dim, heads, seqlen) < 1:
            raise ValueError(f"shape '{item}': D, H and S must be positive")
        causal = len(f) == 4 and f[3].lower() in ("c", "causal", "1", "true")
        if len(f) == 4 and not causal and f[3].lower() not in ("", "n", "0", "false", "noncausal"):
            raise ValueError(f"shape '{item}': 4th field must be c (causal) or n")
        out.append(Shape(dim, heads, seqlen, causal))
    return out


def shapes_arg(text: str) -> list[Shape]:
    """parse_shapes for argparse: its message, not argparse's "invalid value"."""
    try:
        return parse_shapes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def flops(shape: Shape, batch: int = 1) -> float:
    full = 4.0 * batch * shape.heads * shape.seqlen ** 2 * shape.head_dim
    return full / 2 if shape.causal else full


def plan_shape(shape: Shape, n_backends: int, warmup_s: float, block_s: float, rounds: int, budget_s: float,
               min_calls: int, tflops: float = ASSUMED_TFLOPS):
    """(warmup_s, block_s, estimated seconds) for one shape: warm-up and block shrink by one factor when
    n_backends x 2 rounds x (warm-up + block) exceeds budget_s; the estimate adds what a slow call forces
    (at least one warm-up call and min_calls per block, at `tflops`) and SETUP_S."""
    blocks = n_backends * 2 * rounds
    planned = blocks * (warmup_s + block_s)
    if budget_s and planned > budget_s:
        f = budget_s / planned
        warmup_s, block_s = warmup_s * f, block_s * f
    call = flops(shape) / (tflops * 1e12)
    est = blocks * (max(warmup_s, call) + max(block_s, min_calls * call)) + SETUP_S + 4 * call
    return warmup_s, block_s, est


def _get(d, *keys):
    for k in keys:
        if d is None:
            return None
        d = d.get(k)
    return d


def build_row(shape: Shape, res: dict, checks: dict, plan: tuple, batch: int = 1) -> dict:
    """One CSV row from a protocol result and the checks of that shape."""
    stats = res["stats"] if res else {}
    fl = flops(shape, batch)
    row = dict(dtype="bf16", batch=batch, heads=shape.heads, seqlen=shape.seqlen, head_dim=shape.head_dim,
               causal=int(shape.causal), n_inputs=_get(res, "params", "n_inputs"),
               warmup_s=plan[0], block_s=plan[1], rounds=_get(res, "params", "rounds"))
    for b in BACKENDS:
        ms = _get(stats, b, "median_ms")
        row[f"{b}_ms"] = ms
        row[f"{b}_spread"] = _get(stats, b, "spread")
        row[f"{b}_tflops"] = fl / (ms * 1e-3) / 1e12 if ms else None
        row[f"{b}_sm_mhz"] = _get(stats, b, "sm_clock_mhz")
        row[f"{b}_power_w"] = _get(stats, b, "power_w")
    r = bp.ratio(stats, "xstage", "cudnn")
    row.update(ratio_vs_cudnn=r["ratio"], ratio_vs_cudnn_first=r["ratio_first_half"],
               ratio_vs_cudnn_second=r["ratio_second_half"],
               ratio_vs_flash=bp.ratio(stats, "xstage", "flash")["ratio"],
               ratio_vs_flash_flipped=bp.ratio(stats, "xstage", "flash")["flipped"])
    ab = bp.ratio(stats, "xstage", "xstage_before")  # before time / after time: > 1 = the new build is faster
    row.update(ratio_after_vs_before=ab["ratio"], ratio_after_vs_before_first=ab["ratio_first_half"],
               ratio_after_vs_before_second=ab["ratio_second_half"],
               before_ratio_vs_cudnn=bp.ratio(stats, "xstage_before", "cudnn")["ratio"])
    row["host_bound"] = "+".join(b for b in BACKENDS if _get(stats, b, "host_bound_blocks"))
    row.update(checks)
    return row


def summarize_rows(rows: list[dict], meta: dict) -> dict:
    def vals(key, pred=lambda r: True):
        return [r[key] for r in rows if r.get(key) is not None and pred(r)]

    def lo(xs):
        return min(xs) if xs else None

    def flipped_rows(key):  # rows whose ratio's two ABBA halves fall on either side of 1: not results
        return sum(1 for r in rows if r.get(key + "_first") is not None and r.get(key + "_second") is not None
                   and (r[key + "_first"] - 1) * (r[key + "_second"] - 1) < 0)

    ratios = vals("ratio_vs_cudnn")
    after = vals("ratio_after_vs_before")
    s = dict(protocol=meta["protocol"],
             min_ratio_vs_cudnn_all=lo(ratios),
             median_ratio_vs_cudnn=statistics.median(ratios) if ratios else None,
             min_ratio_vs_cudnn_causal=lo(vals("ratio_vs_cudnn", lambda r: r["causal"])),
             min_ratio_vs_cudnn_noncausal_16k=lo(vals("ratio_vs_cudnn", lambda r: not r["causal"] and r["seqlen"] >= 16 * K)),
             min_ratio_vs_cudnn_causal_16k=lo(vals("ratio_vs_cudnn", lambda r: r["causal"] and r["seqlen"] >= 16 * K)),
             min_ratio_vs_cudnn_large=lo(vals("ratio_vs_cudnn", lambda r: not r["causal"] and r["head_dim"] == 128
                                              and r["seqlen"] >= 8 * K and r["heads"] >= 12)),
             ratio_vs_cudnn_flipped_rows=flipped_rows("ratio_vs_cudnn"),
             ratio_after_vs_before_flipped_rows=flipped_rows("ratio_after_vs_before"),
             attention_ratio_after_vs_before=bp.geomean(after),
             attention_ratio_after_vs_before_min=lo(after),
             attention_ratio_after_vs_before_max=max(after) if after else None,
             median_before_ratio_vs_cudnn=statistics.median(vals("before_ratio_vs_cudnn")) if vals("before_ratio_vs_cudnn") else None,
             machine=meta["machine"], command=meta["command"], date=meta["date"], torch=meta["torch"],
             rows=len(rows), wrong=sum(r["wrong"] for r in rows),
             wrong_before=sum(r["before_wrong"] or 0 for r in rows),
             xstage_status=meta.get("xstage_status"), nvml=meta.get("nvml"), library=meta.get("library"),
             library_version=meta.get("library_version"),
             library_before=meta.get("library_before"), seconds=meta.get("seconds"), complete=meta.get("complete", False))
    return s


def fmt(x):
    return "" if x is None else (f"{x:.6g}" if isinstance(x, float) else str(x))


def csv_lines(rows):
    return ["# " + ",".join(COLUMNS)] + [",".join(fmt(r.get(c)).replace(",", ";") for c in COLUMNS) for r in rows]


def write_outputs(out: Path | None, rows, summary, shapes_json):
    if not out:
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("attention.csv", "\n".join(csv_lines(rows)) + "\n"),
                       ("summary.json", json.dumps(summary, indent=2) + "\n"),
                       ("attention_blocks.json", json.dumps(shapes_json, indent=1) + "\n")):
        tmp = out / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out / name)


def print_table(rows, summary, with_before):
    def c(x, f="{:8.1f}", w=8):
        return f.format(x) if x is not None else "-".rjust(w)
    head = (f"{'D':>4} {'H':>3} {'S':>6} {'c':>1} {'xstage':>8} {'cuDNN':>8} {'flash':>8}"
            + (f" {'before':>8}" if with_before else "") + f" {'x/cuDNN':>8} {'1st/2nd half':>13}"
            + (f" {'aft/bef':>8}" if with_before else "") + f" {'spread%':>7} {'MHz x/c':>9}  check")
    print("TFLOP/s (median of blocks); x/cuDNN = cuDNN time / xstage time; spread = worst (max-min)/median")
    print(head)
    for r in rows:
        spreads = [r[f"{b}_spread"] for b in BACKENDS if r.get(f"{b}_spread") is not None]
        flip = (r["ratio_vs_cudnn_first"] is not None and r["ratio_vs_cudnn_second"] is not None
                and (r["ratio_vs_cudnn_first"] - 1) * (r["ratio_vs_cudnn_second"] - 1) < 0)
        check = ("unsupported" if r["xstage_status"] != "ok" else "MISMATCH" if r["wrong"]
                 else "BEFORE MISMATCH" if r["before_wrong"] else "ok") + (" FLIPS" if flip else "") \
            + (f" host-bound:{r['host_bound']}" if r["host_bound"] else "")
        mhz = (f"{r['xstage_sm_mhz']:4.0f}/{r['cudnn_sm_mhz']:4.0f}" if r["xstage_sm_mhz"] and r["cudnn_sm_mhz"]
               else "-".rjust(9))
        print(f"{r['head_dim']:>4} {r['heads']:>3} {r['seqlen']:>6} {r['causal']:>1} {c(r['xstage_tflops'])} "
              f"{c(r['cudnn_tflops'])} {c(r['flash_tflops'])}" + (f" {c(r['xstage_before_tflops'])}" if with_before else "")
              + f" {c(r['ratio_vs_cudnn'], '{:8.3f}')} {c(r['ratio_vs_cudnn_first'], '{:6.3f}', 6)}/"
              f"{c(r['ratio_vs_cudnn_second'], '{:6.3f}', 6)}"
              + (f" {c(r['ratio_after_vs_before'], '{:8.3f}')}" if with_before else "")
              + f" {c(100 * max(spreads) if spreads else None, '{:7.1f}', 7)} {mhz:>9}  {check}")
    s = summary
    print(f"ratio vs cuDNN: min {fmt(s['min_ratio_vs_cudnn_all']) or '-'}, median {fmt(s['median_ratio_vs_cudnn']) or '-'}, "
          f"causal min {fmt(s['min_ratio_vs_cudnn_causal']) or '-'}, non-causal S>=16K min "
          f"{fmt(s['min_ratio_vs_cudnn_noncausal_16k']) or '-'}, causal S>=16K min {fmt(s['min_ratio_vs_cudnn_causal_16k']) or '-'}; "
          f"rows whose halves flip: {s['ratio_vs_cudnn_flipped_rows']}; wrong rows: {s['wrong']}"
          + (f" (+{s['wrong_before']} before)" if s["wrong_before"] else ""))
    if with_before:
        print(f"after vs before (before time / after time): geomean {fmt(s['attention_ratio_after_vs_before']) or '-'}, "
              f"min {fmt(s['attention_ratio_after_vs_before_min']) or '-'}, max {fmt(s['attention_ratio_after_vs_before_max']) or '-'}")
    print(f"protocol: {s['protocol']}")


# ----------------------------------------------------------------------------------------------------------
# Environments: the GPU (torch, xstage, SDPA) and the dry run (sleep-based fakes on the CPU)

class DryEnv:
    """Fake backends that sleep a time proportional to the shape's flops (xstage 5 % faster than cuDNN,
    the 'before' build as fast as cuDNN, flash 15 % slower), timed by the wall clock; no NVML readings
    unless the machine has them."""
    torch_version = None
    library_version = None
    timer_name = "wall"

    def __init__(self, args):
        self.with_before = args.lib_before is not None
        self.machine = "dry-run (CPU, fake sleep-based backends)"
        self.library, self.library_before = "dry-run", ("dry-run" if self.with_before else None)
        self.reader = bp.NvmlReader(0)
        self.base_flops = flops(Shape(128, 12, 4 * K, False))

    def prepare(self, shape):
        per_call = 4e-4 * min(4.0, max(0.5, flops(shape) / self.base_flops) ** 0.25)
        speed = {"xstage": 1.05, "cudnn": 1.0, "flash": 0.85, "xstage_before": 1.0}

        def fake(name):
            return lambda inp: time.sleep(per_call / speed[name])
        names = [b for b in BACKENDS if b != "xstage_before" or self.with_before]
        checks = dict(max_abs_diff=0.0, tol=1.0, wrong=0, xstage_status="ok",
                      before_max_abs_diff=0.0 if self.with_before else None, before_wrong=0 if self.with_before else None)
        return {n: fake(n) for n in names}, [object()] * 3, checks

    def timer(self, n_inputs, use_graph):
        return bp.WallTimer()

    def release(self):
        pass


class BeforeLib:
    """A second build of libxstage_attention.so, called through its C ABI with the ctypes struct of
    xstage.attention (xstage.attention itself loads only the library named by XSTAGE_ATTENTION_LIB)."""

    def __init__(self, path: Path, xa):
        self.xa, self.path = xa, path
        lib = ctypes.CDLL(str(path))  # RTLD_LOCAL: its symbols do not replace the main build's
        lib.xstage_attn_fwd.argtypes = [ctypes.POINTER(xa.Params), ctypes.c_void_p]
        lib.xstage_attn_fwd.restype = ctypes.c_int
        lib.xstage_last_error.argtypes = []
        lib.xstage_last_error.restype = ctypes.c_char_p
        self.lib = lib
        self._strides = getattr(xa, "_strides", None) or self._strides_local

    @staticmethod
    def _strides_local(t, name):  # as xstage.attention._strides
        return [t.stride(i) if t.shape[i] > 1 else t.shape[3] for i in range(3)]

    def fwd(self, q, k, v, out, scale, causal, stream):
        xa = self.xa
        p = xa.Params()
        p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), None
        p.batch, p.seqlen_q, p.heads, p.head_dim = q.shape
        p.seqlen_kv = k.shape[1]
        for field, t, name in (("q_stride", q, "q"), ("k_stride", k, "k"), ("v_stride", v, "v"), ("o_stride", out, "out")):
            getattr(p, field)[:] = self._strides(t, name)
        p.softmax_scale, p.causal = float(scale), int(causal)
        p.dtype = xa.DTYPE_BF16 if q.dtype == self.torch.bfloat16 else xa.DTYPE_FP16
        rc = self.lib.xstage_attn_fwd(ctypes.byref(p), ctypes.c_void_p(stream()))
        if rc != xa.OK:
            raise xa.XstageError(rc, self.lib.xstage_last_error().decode())
        return out


class GpuEnv:
    timer_name = "events"

    def __init__(self, args):
        if args.lib:
            os.environ["XSTAGE_ATTENTION_LIB"] = str(args.lib.resolve())
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from xstage import attention as xa
        self.torch, self.F, self.SDPBackend, self.sdpa_kernel, self.xa = torch, F, SDPBackend, sdpa_kernel, xa
        self.args = args
        self.dev = torch.device("cuda")
        props = torch.cuda.get_device_properties(self.dev)
        self.l2_bytes = getattr(props, "L2_cache_size", 60 << 20)
        self.machine = f"{torch.cuda.get_device_name(self.dev)} x{torch.cuda.device_count()}"
        try:
            self.machine += f", cuDNN {torch.backends.cudnn.version()}"
        except Exception:  # noqa: BLE001
            pass
        self.torch_version = torch.__version__
        self.library = str(xa.library_path())
        self.library_version = xa.library_version()  # "xstage 0.1.0 (git ...)": the build, not only its path
        self.before = None
        if args.lib_before:
            self.before = BeforeLib(args.lib_before.resolve(), xa)
            self.before.torch = torch
        self.library_before = str(args.lib_before.resolve()) if args.lib_before else None
        self.with_before = self.before is not None
        self.nvml_device = bp.nvml_index_from_env(torch.cuda.current_device())
        self.reader = bp.NvmlReader(self.nvml_device)
        self.held = []

    def timer(self, n_inputs, use_graph):
        if use_graph:
            return bp.CudaGraphTimer(n_inputs * math.ceil(16 / n_inputs))
        return bp.CudaEventTimer()

    def prepare(self, shape):
        torch, F, xa = self.torch, self.F, self.xa
        batch, dim, heads, seqlen, causal = 1, shape.head_dim, shape.heads, shape.seqlen, shape.causal
        gen = torch.Generator(device=self.dev).manual_seed(self.args.seed + 7 * seqlen + heads + dim + int(causal))
        set_bytes = 3 * batch * seqlen * heads * dim * 2
        n_sets = bp.n_input_sets(set_bytes, self.l2_bytes)
        full = (batch, seqlen, heads, dim)
        sets = []
        for _ in range(n_sets):
            q, k, v = (torch.randn(full, generator=gen, device=self.dev, dtype=torch.bfloat16) for _ in range(3))
            sets.append((q, k, v) + tuple(t.transpose(1, 2) for t in (q, k, v)))  # SDPA: (B, H, S, D) views
        out = torch.empty(full, device=self.dev, dtype=torch.bfloat16)
        out_before = torch.empty(full, device=self.dev, dtype=torch.bfloat16) if self.before else None
        scale = 1.0 / math.sqrt(dim)
        stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731 (the capture stream under --graph)

        def ours(s):
            return xa.flash_attn_fwd(s[0], s[1], s[2], softmax_scale=scale, causal=causal, out=out)

        def before(s):
            return self.before.fwd(s[0], s[1], s[2], out_before, scale, causal, stream)

        def sdpa_fn(backend):
            def call(s):
                with self.sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(s[3], s[4], s[5], is_causal=causal, scale=scale)
            return call

        backends, ref = {}, None
        checks = dict(max_abs_diff=None, tol=None, wrong=0, before_max_abs_diff=None, before_wrong=None,
                      xstage_status="ok")
        try:
            ours(sets[0])
            torch.cuda.synchronize()
        except xa.XstageError as e:
            checks["xstage_status"] = f"unsupported: {e}"
        for name, be in (("cudnn", self.SDPBackend.CUDNN_ATTENTION), ("flash", self.SDPBackend.FLASH_ATTENTION)):
            fn = sdpa_fn(be)
            try:
                o = fn(sets[0])
                torch.cuda.synchronize()
                if name == "cudnn":
                    ref = o.transpose(1, 2)
                backends[name] = fn
            except RuntimeError as e:
                print(f"# {name} unavailable at {shape}: {str(e).splitlines()[0]}", flush=True)

        def check(o):
            if ref is None:
                return None, None, 0
            diff = (o.float() - ref.float()).abs().max().item()  # NaN propagates through max
            tol = 2.0 ** -5 * ref.float().abs().max().item()
            return diff, tol, int(not (diff <= tol))

        if checks["xstage_status"] == "ok":
            checks["max_abs_diff"], checks["tol"], checks["wrong"] = check(out)
            backends = {"xstage": ours, **backends}
        if self.before:
            try:
                before(sets[0])
                torch.cuda.synchronize()
                checks["before_max_abs_diff"], _, checks["before_wrong"] = check(out_before)
                backends["xstage_before"] = before
            except xa.XstageError as e:
                print(f"# xstage_before failed at {shape}: {e}", flush=True)
        self.held = [sets, out, out_before]
        return {b: backends[b] for b in BACKENDS if b in backends}, sets, checks

    def release(self):
        self.held = []
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="4 shapes (one causal)")
    g.add_argument("--shapes", type=shapes_arg, help="custom list D:H:S[:c],... (e.g. 128:24:32K:c,64:12:4096)")
    ap.add_argument("--out", type=Path, help="write attention.csv, summary.json, attention_blocks.json here")
    ap.add_argument("--lib", type=Path, help="libxstage_attention.so (default: $XSTAGE_ATTENTION_LIB, then build/)")
    ap.add_argument("--lib-before", type=Path, help="a second build, timed in the same process as backend xstage_before")
    ap.add_argument("--warmup-s", type=float, default=None, help="warm-up per block (default 0.2; dry run 0.01)")
    ap.add_argument("--block-s", type=float, default=None, help="timed block (default 0.4; dry run 0.03)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of forward+reverse order (2 blocks per backend each)")
    ap.add_argument("--budget-s", type=float, default=10.0, help="planned time cap per shape (warm-up and block shrink)")
    ap.add_argument("--min-calls", type=int, default=bp.DEFAULT_MIN_CALLS, help="least calls per block")
    ap.add_argument("--graph", action="store_true", help="time CUDA-graph replays instead of eager back-to-back calls")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--verbose", action="store_true", help="print every block")
    ap.add_argument("--dry-run", action="store_true", help="fake backends on the CPU (no torch, no GPU)")
    args = ap.parse_args(argv)
    dry = args.dry_run
    args.warmup_s = args.warmup_s if args.warmup_s is not None else (0.01 if dry else 0.2)
    args.block_s = args.block_s if args.block_s is not None else (0.03 if dry else 0.4)
    # (comparisons that NaN fails, so nan is refused too; inf would make the block plan's arithmetic overflow)
    for name, value, ok in (("--rounds", args.rounds, args.rounds >= 1), ("--min-calls", args.min_calls, args.min_calls >= 1),
                            ("--warmup-s", args.warmup_s, 0 <= args.warmup_s <= 3600),
                            ("--block-s", args.block_s, 0 < args.block_s <= 3600),
                            ("--budget-s", args.budget_s, 0 < args.budget_s <= 86400)):
        if not ok:
            ap.error(f"{name} {value}: need --rounds >= 1, --min-calls >= 1, --warmup-s in [0, 3600] s, "
                     f"--block-s in (0, 3600] s, --budget-s in (0, 86400] s")
    return args


def main(argv=None):
    args = parse_args(argv)
    t_start = time.time()
    grid = args.shapes or (QUICK_GRID if args.quick or args.dry_run else FULL_GRID)
    env = DryEnv(args) if args.dry_run else GpuEnv(args)
    n_backends = 3 + int(env.with_before)
    plans = [plan_shape(s, n_backends, args.warmup_s, args.block_s, args.rounds, args.budget_s, args.min_calls) for s in grid]
    timer_name = "graph" if args.graph and not args.dry_run else env.timer_name
    protocol = (bp.protocol_string(args.warmup_s, args.block_s, args.rounds, timer_name, "per-shape (> 2x L2)",
                                   args.min_calls) + f", budget {args.budget_s:g} s/shape")
    meta = dict(protocol=protocol, machine=env.machine, torch=env.torch_version,
                command="python3 " + " ".join(shlex.quote(a) for a in (sys.argv if argv is None else [sys.argv[0], *argv])),
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                nvml=env.reader.available, library=env.library, library_version=env.library_version,
                library_before=env.library_before)
    print(f"# xstage attention benchmark on {env.machine}; torch {env.torch_version}; library {env.library}"
          + (f" ({env.library_version})" if env.library_version else "")
          + (f"; before {env.library_before}" if env.library_before else ""), flush=True)
    print(f"# {len(grid)} shapes x {n_backends} backends; {protocol}; NVML "
          f"{'on' if env.reader.available else 'absent (clock/power null)'}", flush=True)
    print(f"# estimated total: {sum(p[2] for p in plans):.0f} s (assuming {ASSUMED_TFLOPS:.0f} TFLOP/s)", flush=True)

    rows, shapes_json, statuses = [], [], set()
    for shape, plan in zip(grid, plans):
        t0 = time.time()
        backends, inputs, checks = env.prepare(shape)
        statuses.add(checks["xstage_status"].split(":")[0])
        res = None
        if backends:
            res = bp.run_protocol(backends, inputs, warmup_s=plan[0], block_s=plan[1], rounds=args.rounds,
                                  min_calls=args.min_calls, timer=env.timer(len(inputs), args.graph),
                                  reader=env.reader, log=(lambda m: print(m, flush=True)) if args.verbose else None)
        del backends, inputs  # the input sets die before the next shape's are made
        env.release()
        row = build_row(shape, res, checks, plan)
        rows.append(row)
        shapes_json.append(dict(shape=shape._asdict(), seconds=time.time() - t0, checks=checks, result=res))
        print(f"# D={shape.head_dim} H={shape.heads} S={shape.seqlen}{' causal' if shape.causal else ''}: "
              + ", ".join(f"{b} {row[f'{b}_ms']:.4f} ms ({100 * (row[f'{b}_spread'] or 0):.1f}%)"
                          for b in BACKENDS if row[f"{b}_ms"] is not None)
              + (f"; xstage/cuDNN {row['ratio_vs_cudnn']:.3f} (halves {fmt(row['ratio_vs_cudnn_first'])}/"
                 f"{fmt(row['ratio_vs_cudnn_second'])})" if row["ratio_vs_cudnn"] else "")
              + (f"; after/before {row['ratio_after_vs_before']:.3f}" if row["ratio_after_vs_before"] else "")
              + ("" if checks["xstage_status"] == "ok" else f"; xstage {checks['xstage_status']}")
              + ("  MISMATCH" if checks["wrong"] else "") + ("  BEFORE MISMATCH" if checks["before_wrong"] else "")
              + f"  [{time.time() - t0:.1f} s]", flush=True)
        meta.update(seconds=time.time() - t_start,
                    xstage_status="ok" if statuses == {"ok"} else "unsupported" if statuses == {"unsupported"} else "mixed")
        write_outputs(args.out, rows, summarize_rows(rows, meta), shapes_json)

    meta["complete"] = True
    summary = summarize_rows(rows, meta)
    write_outputs(args.out, rows, summary, shapes_json)
    env.reader.close()
    print("\n".join(csv_lines(rows)))
    print()
    print_table(rows, summary, env.with_before)
    print(f"# {time.time() - t_start:.0f} s")
    return 1 if summary["wrong"] or summary["wrong_before"] else 0


if __name__ == "__main__":
    sys.exit(main())
