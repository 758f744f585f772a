#!/usr/bin/env python3
"""The fused MoE layer called from PyTorch (xstage.moe) against what a torch user runs on one GPU, in one process,
by the benchmark protocol (python/xstage/bench_protocol.py: own warm-up, steady-state blocks, ABBA order).

Backends (P = 1, one GPU; every call gets a fresh routing from a rotating set, so the plan is made again each call):
  xstage        layer(x bf16, topk_idx, topk_weight, w): quantizes x in torch, makes the dispatch plan on the GPU from
                topk_idx (plan="device"), enqueues the fused kernel and the weighted sum (the whole Python call; nothing
                waits for the GPU)
  xstage-hostplan  the same with plan="host": the routing copied to the host (a synchronisation of the stream), the
                plan built there and uploaded
  xstage-fp8in  xstage with x already quantized (FP8 codes + 1x128 scales, as an FP8 pipeline keeps them)
  torch-bf16    sort by expert, torch._grouped_mm (bf16 grouped GEMM) for Linear-1, SwiGLU, _grouped_mm for Linear-2,
                weighted scatter-add back: a torch MoE layer without quantization
  torch-fp8     the same with torch._scaled_grouped_mm in FP8 e4m3 with rowwise scales (per token row, per weight
                column; fast accumulation, as torchao's FP8 MoE calls it): torch's FP8 grouped GEMM, coarser scales
                than the layer's 1x128 / 128x128 blocks
Before timing, each backend's output is checked: xstage against moe_reference of its own quantization (the tests'
tolerance rule), and every backend against one float64 layer on the bf16 inputs (relative rms, printed and in the
JSON: what each one's quantization costs).

    python3 bench/moe/torch_moe.py --shapes deepseek-v4-flash,qwen3-30b-a3b --tokens 8192 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

# --order: xstage.moe.ORDERS and "auto" (written out: argument parsing imports neither torch nor the library)
ORDER_CHOICES = ["interleaved", "expert-wave", "expert-wave-lagged", "l1-first", "auto"]

SHAPES = {  # hidden, inter, experts, topk (include/xstage/moe/shapes.hpp has the sources)
    "dit-moe-xl": (1152, 4608, 16, 2), "qwen3-30b-a3b": (2048, 768, 128, 8), "qwen3-235b-a22b": (4096, 1536, 128, 8),
    "deepseek-v3": (7168, 2048, 256, 8), "deepseek-v4-flash": (4096, 2048, 256, 6),
    "deepseek-v4-pro": (7168, 3072, 384, 6), "glm-flash": (4096, 2048, 288, 8),
}


def routing(tokens, experts, topk, gen, torch, probs=None):
    """Each token's top-k experts drawn without repeats (uniformly, or weighted by `probs` [E]) and its top-k weights
    (positive, summing to 1)."""
    w = torch.ones(experts, device="cuda") if probs is None else probs
    idx = torch.multinomial(w.expand(tokens, experts).contiguous(), topk, replacement=False,
                            generator=gen).to(torch.int32)
    wt = torch.rand(tokens, topk, generator=gen, device="cuda") + 0.1
    return idx, wt / wt.sum(-1, keepdim=True)


def swiglu_experts(rows, offs, inter, linear1, linear2, torch):
    """Rows grouped by expert (offs: cumulative rows per expert): linear1(rows, offs) -> [M, 2I] (gate, up), SwiGLU in
    fp32, linear2(h fp32, offs) -> [M, H]."""
    gu = linear1(rows, offs)
    return linear2(torch.nn.functional.silu(gu[:, :inter].float()) * gu[:, inter:].float(), offs)


def grouped_layer(x, idx, wt, experts, inter, linear1, linear2, torch):
    """A torch MoE layer around two grouped GEMMs: rows sorted by expert (stable), swiglu_experts, the top-k weighted
    sum scattered back in fp32."""
    T, k = idx.shape
    flat = idx.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=experts), 0).to(torch.int32)
    y = swiglu_experts(x[order // k], offs, inter, linear1, linear2, torch)
    out = torch.zeros(T, x.shape[1], device=x.device, dtype=torch.float32)
    out.index_add_(0, order // k, y.float() * wt.reshape(-1)[order].unsqueeze(-1))
    return out


def bf16_linears(w1t, w2t, torch):
    """The two grouped GEMMs of the bf16 layer: w1t [E, H, 2I], w2t [E, I, H] bf16 views of [E, 2I, H], [E, H, I]
    (_grouped_mm's [G, K, N])."""
    return (lambda a, offs: torch._grouped_mm(a, w1t, offs=offs),
            lambda h, offs: torch._grouped_mm(h.to(torch.bfloat16), w2t, offs=offs))


def torch_bf16_layer(x, idx, wt, w1t, w2t, torch):
    """x [T, H] bf16 through bf16_linears."""
    return grouped_layer(x, idx, wt, w1t.shape[0], w2t.shape[1], *bf16_linears(w1t, w2t, torch), torch)


def rowwise_fp8(t, dim, torch):
    """t quantized to e4m3 with one scale per slice along `dim` reduced (amax / 448): (codes, dequant scales)."""
    s = (t.float().abs().amax(dim=dim, keepdim=True).clamp_min(1e-4) / 448.0)
    return (t.float() / s).to(torch.float8_e4m3fn), s.squeeze(dim)


def torch_fp8_weights(w1, w2, torch):
    """Rowwise FP8 weights for torch._scaled_grouped_mm: [E, K, N] column-major views and [E, N] scales (quantized
    16 experts at a time, to bound the float temporaries)."""
    out = []
    for w in (w1, w2):
        q = torch.empty(w.shape, dtype=torch.float8_e4m3fn, device=w.device)
        sc = torch.empty(w.shape[:2], dtype=torch.float32, device=w.device)
        for e in range(0, w.shape[0], 16):
            q[e:e + 16], sc[e:e + 16] = rowwise_fp8(w[e:e + 16], 2, torch)
        out += [q.transpose(1, 2), sc]
    return tuple(out)


def fp8_linears(w8, torch):
    """The two grouped GEMMs through torch._scaled_grouped_mm (FP8 e4m3, rowwise scales: one per token row and one per
    weight output column, fast accumulation, as torchao's FP8 MoE path calls it), the rows (x, then h) quantized
    rowwise; w8 from torch_fp8_weights."""
    q1, s1, q2, s2 = w8

    def scaled(t, q, sq, offs):
        tq, st = rowwise_fp8(t, 1, torch)
        return torch._scaled_grouped_mm(tq, q, st, sq, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True)
    return lambda a, offs: scaled(a, q1, s1, offs), lambda h, offs: scaled(h, q2, s2, offs)


def torch_fp8_layer(x, idx, wt, w8, torch):
    """The same layer through fp8_linears."""
    return grouped_layer(x, idx, wt, w8[0].shape[0], w8[2].shape[1], *fp8_linears(w8, torch), torch)


KNOWN = ("xstage", "xstage-hostplan", "xstage-fp8in", "torch-bf16", "torch-fp8")


def check_args(ap, a, known, seconds=("block",)):
    """The checks this script and torch_moe_ep.py share (ap.error names the bad value): known shapes and backends, counts
    >= 1, positive seconds. Returns the backend names."""
    for s in a.shapes.split(","):
        if s not in SHAPES:
            ap.error(f"unknown shape {s!r}; known: {', '.join(SHAPES)}")
    names = a.backends.split(",")
    for b in names:
        if b not in known:
            ap.error(f"unknown backend {b!r}; known: {', '.join(known)}")
    for flag, v in (("--tokens", a.tokens), ("--sets", a.sets), ("--rounds", a.rounds)):
        if v < 1:
            ap.error(f"{flag} {v} must be >= 1")
    for name in seconds:
        if not getattr(a, name) > 0:
            ap.error(f"--{name} {getattr(a, name)} must be a positive number of seconds")
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="deepseek-v4-flash,qwen3-30b-a3b,dit-moe-xl")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--order", default="interleaved", choices=ORDER_CHOICES,
                    help="the layer's tile order (auto: MoeLayer.auto_order, the platform model's choice)")
    ap.add_argument("--backends", default="xstage,xstage-hostplan,xstage-fp8in,torch-bf16,torch-fp8",
                    help="a subset, in this order")
    ap.add_argument("--sets", type=int, default=4, help="routings / activations rotated over the calls")
    ap.add_argument("--warmup", type=float, default=0.3)
    ap.add_argument("--block", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args()
    names = check_args(ap, a, KNOWN, ("warmup", "block"))

    import torch
    from xstage.bench_protocol import format_result, nvml_index_from_env, ratio, run_protocol
    from xstage.moe import MoeLayer, MoeWeights, moe_reference, quantize_act, quantize_weights
    from xstage.team import Team

    team = Team.emulated(1)
    results = []
    for name in a.shapes.split(","):
        H, I, E, k = SHAPES[name]
        T = a.tokens
        gen = torch.Generator(device="cuda").manual_seed(a.seed)
        # bf16 weights, as a model holds them; every backend starts from these
        w1 = (torch.randn(E, 2 * I, H, generator=gen, device="cuda") / H ** 0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, generator=gen, device="cuda") / I ** 0.5).to(torch.bfloat16)
        wq = quantize_weights(w1, w2, "w8a8", keep_reference=True)
        # _grouped_mm's [G, K, N] operand with K contiguous (column-major per group, as torch's own tests pass it)
        w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)
        w8 = torch_fp8_weights(w1, w2, torch) if "torch-fp8" in names else None
        del w1, w2
        # torch-bf16's own float64 reference reads its bf16 weights through views (no copy)
        wb = MoeWeights("bf16", E, H, I, None, None, None, None, w1t.transpose(1, 2), w2t.transpose(1, 2))
        sets = []
        for _ in range(a.sets):
            x = torch.randn(T, H, generator=gen, device="cuda").to(torch.bfloat16)
            idx, wt = routing(T, E, k, gen, torch)
            codes, scales = quantize_act(x)
            sets.append((x, idx, wt, codes, scales))
        layer = MoeLayer(team, H, I, E, k, T, "w8a8")
        order = layer.auto_order()[0] if a.order == "auto" else a.order  # recorded as run
        backends = {
            "xstage": lambda s, L=layer, W=wq, o=order: L(s[0], s[1], s[2], W, order=o),
            "xstage-hostplan": lambda s, L=layer, W=wq, o=order: L(s[0], s[1], s[2], W, order=o, plan="host"),
            "xstage-fp8in": lambda s, L=layer, W=wq, o=order: L(s[3], s[1], s[2], W, x_scale=s[4], order=o),
            "torch-bf16": lambda s, A=w1t, B=w2t: torch_bf16_layer(s[0], s[1], s[2], A, B, torch),
            "torch-fp8": lambda s, W=w8: torch_fp8_layer(s[0], s[1], s[2], W, torch),
        }
        backends = {b: backends[b] for b in names}
        # correctness on the first set
        x, idx, wt, codes, scales = sets[0]
        ref, exact = moe_reference(x, idx, wt, wq), moe_reference(x, idx, wt, wq, exact=True)
        out = layer(x, idx, wt, wq, order=order).double()
        layer.check()
        rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
        ok = rms(out - ref) <= 0.25 * rms(ref - exact) and not torch.isnan(out).any().item()
        row = {"shape": name, "hidden": H, "inter": I, "experts": E, "topk": k, "tokens": T, "order": order,
               "order_requested": a.order,
               "xstage_rel_rms_vs_own_reference": rms(out - ref) / rms(ref), "xstage_correct": bool(ok)}
        # Every backend against one float64 layer on the bf16 inputs (x and the weights as the torch paths get them):
        # what each one's own quantization costs, comparable across them.
        ex_b = moe_reference(x, idx, wt, wb, exact=True)
        row["xstage_rel_rms_vs_float64"] = rms(out - ex_b) / rms(ex_b)
        try:
            tb = torch_bf16_layer(x, idx, wt, w1t, w2t, torch).double()
            row["torch_bf16_rel_rms_vs_float64"] = rms(tb - ex_b) / rms(ex_b)
        except (RuntimeError, AttributeError, TypeError) as e:  # _grouped_mm missing or refusing the shape
            row["torch_bf16_unavailable"] = str(e).splitlines()[0]
            backends.pop("torch-bf16", None)
        if "torch-fp8" in backends:
            try:
                tf = torch_fp8_layer(x, idx, wt, w8, torch).double()
                row["torch_fp8_rel_rms_vs_float64"] = rms(tf - ex_b) / rms(ex_b)
                del tf
            except (RuntimeError, AttributeError, TypeError) as e:
                row["torch_fp8_unavailable"] = str(e).splitlines()[0]
                backends.pop("torch-fp8")
        del ref, exact
        if not ok:
            print(f"{name}: xstage output MISMATCH against its reference; not timed", flush=True)
            results.append(row)
            continue
        res = run_protocol(backends, sets, warmup_s=a.warmup, block_s=a.block, rounds=a.rounds,
                           nvml_device=nvml_index_from_env(torch.cuda.current_device()))
        print(f"== {name} T={T} (H={H} I={I} E={E} k={k}), {team.label}")
        print("relative rms against the float64 layer on bf16 inputs: " + ", ".join(
            f"{b} {row[key]:.2e}" for b, key in (("xstage", "xstage_rel_rms_vs_float64"),
                                                ("torch-bf16", "torch_bf16_rel_rms_vs_float64"),
                                                ("torch-fp8", "torch_fp8_rel_rms_vs_float64")) if key in row))
        print(format_result(res, ref="torch-bf16" if "torch-bf16" in backends else "xstage"))
        if "xstage" in backends and "xstage-hostplan" in backends:
            r = ratio(res["stats"], "xstage", "xstage-hostplan")
            print(f"xstage (device plan) vs xstage-hostplan: {r['ratio']:.3f} (1st / 2nd half {r['ratio_first_half']:.3f}"
                  f" / {r['ratio_second_half']:.3f})")
        if "torch-fp8" in backends:
            for b in ("xstage", "xstage-fp8in"):
                if b in backends:
                    r = ratio(res["stats"], b, "torch-fp8")
                    print(f"{b} vs torch-fp8: {r['ratio']:.3f} (1st / 2nd half {r['ratio_first_half']:.3f} / "
                          f"{r['ratio_second_half']:.3f})")
        row["stats"] = res["stats"]
        flops = 2.0 * T * k * (2 * I * H + H * I)
        for b, st in res["stats"].items():
            row[f"{b}_ms"] = st["median_ms"]
            row[f"{b}_tflops"] = flops / (st["median_ms"] * 1e-3) / 1e12
        for ref in ("torch-bf16", "torch-fp8"):
            if ref in backends:
                for b in ("xstage", "xstage-fp8in"):
                    row[f"{b}_vs_{ref.replace('-', '_')}"] = ratio(res["stats"], b, ref)
        row["fp8in_vs_xstage"] = ratio(res["stats"], "xstage-fp8in", "xstage")
        row["xstage_vs_xstage_hostplan"] = ratio(res["stats"], "xstage", "xstage-hostplan")
        results.append(row)
        del layer, sets, wq, wb, w1t, w2t, w8, backends
        torch.cuda.empty_cache()
    if a.json:
        Path(a.json).write_text(json.dumps({"command": " ".join(sys.argv), "team": team.label,
                                            "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                            "rows": results}, indent=1, default=str))
    return 0 if all(r["xstage_correct"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
