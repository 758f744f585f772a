#!/usr/bin/env python3
"""The fused MoE layer called from PyTorch (xstage.moe) with expert parallelism over real ranks, against the expert-
parallel MoE layer a torch user assembles, in the same processes (one process per GPU under torchrun):

    torchrun --nproc-per-node 2 bench/moe/torch_moe_ep.py --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 8192 \
        --json out.json

Rank r holds experts [r E/P, (r + 1) E/P) and T tokens with their top-k routing over all E experts: balanced (uniform
top-k without repeats) or skewed (--routing skewed: Zipf(1) popularity over a random order of the experts, top-k
without repeats by weight, as xstage::moe::generate_routing; the ranks' loads differ). Backends:
  xstage        MoeLayer(Team.from_process_group(), ...)(x bf16, topk_idx, topk_weight, w): x quantized in torch, the
                dispatch plan made on the GPUs (counts exchanged by peer stores), one fused kernel (dispatch by peer
                stores, Linear-1, SwiGLU, Linear-2, combine by peer stores), the weighted sum; nothing waits for the host
  torch-bf16    the torch way (as Megatron-style token dispatchers do it): rows sorted by expert, the counts exchanged by
                all_to_all_single and copied to the host (the split sizes), the rows sent by all_to_all_single, regrouped
                by expert, two torch._grouped_mm (bf16) with SwiGLU between, the rows sent back, the weighted sum
  torch-fp8     the same with torch._scaled_grouped_mm in FP8 e4m3 with rowwise scales (bench/moe/torch_moe.py's)
Every rank makes the same number of calls per block (agreed by an all-reduce: every call waits for the other ranks).
Before timing, each rank checks xstage against moe_reference of its own quantization over the global batch (the tests'
tolerance rule), and every backend against one float64 layer on the bf16 inputs (relative rms). Rank 0 prints a table
per shape (times: per-rank maxima of the medians) and writes --json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_moe as tm  # noqa: E402  (SHAPES, routing, the layer's pieces; imports no torch itself)


def zipf_routing(tokens, experts, topk, gen, torch, alpha=1.0):
    """Skewed routing: expert popularity 1 / rank^alpha over a random order, each token's top-k drawn without repeats
    with those weights (torch.multinomial: the weighted sampling without replacement of generate_routing's keys)."""
    order = torch.randperm(experts, generator=gen, device="cuda")
    w = torch.empty(experts, device="cuda")
    w[order] = 1.0 / torch.arange(1, experts + 1, device="cuda", dtype=torch.float32) ** alpha
    return tm.routing(tokens, experts, topk, gen, torch, probs=w)


def ep_layer(x, idx, wt, experts_here, inter, linear1, linear2, group, torch, dist):
    """Expert-parallel MoE layer in torch: x [T, H], idx [T, k] global expert ids, wt [T, k]; this rank holds
    experts_here consecutive experts (rank r: [r El, (r + 1) El)). linear1(rows, offs) -> [M, 2I] (gate, up),
    linear2(h fp32, offs) -> [M, H] over rows grouped by local expert (torch_moe.swiglu_experts)."""
    P = dist.get_world_size(group)
    El = experts_here
    T, k = idx.shape
    H = x.shape[1]
    flat = idx.reshape(-1).long()
    order = torch.argsort(flat, stable=True)  # rows grouped by expert, so by destination rank
    cnt = torch.bincount(flat, minlength=P * El)  # [P * El]: this rank's rows per global expert
    rcnt = torch.empty_like(cnt)
    dist.all_to_all_single(rcnt, cnt, group=group)  # block s: source s's rows for each of my El experts
    rc = rcnt.view(P, El)
    send_h = cnt.view(P, El).sum(1).tolist()  # the split sizes on the host: a synchronisation, as in every torch EP
    recv_h = rc.sum(1).tolist()
    send = x[order // k]
    recv = torch.empty(sum(recv_h), H, dtype=x.dtype, device=x.device)
    dist.all_to_all_single(recv, send, recv_h, send_h, group=group)
    # received rows are source-major, then expert: regroup them expert-major for the grouped GEMMs
    eid = torch.repeat_interleave(torch.arange(El, device=x.device).repeat(P), rc.reshape(-1))
    perm = torch.argsort(eid, stable=True)
    offs = torch.cumsum(rc.sum(0), 0).to(torch.int32)
    y = tm.swiglu_experts(recv[perm], offs, inter, linear1, linear2, torch)
    back = torch.empty_like(y)
    back[perm] = y  # source-major again
    ret = torch.empty(send.shape[0], H, dtype=y.dtype, device=x.device)
    dist.all_to_all_single(ret, back, send_h, recv_h, group=group)
    out = torch.zeros(T, H, device=x.device, dtype=torch.float32)
    out.index_add_(0, order // k, ret.float() * wt.reshape(-1)[order].unsqueeze(-1))
    return out


KNOWN = ("xstage", "torch-bf16", "torch-fp8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="qwen3-30b-a3b,deepseek-v4-flash,dit-moe-xl")
    ap.add_argument("--tokens", type=int, default=8192, help="tokens per rank")
    ap.add_argument("--order", default="interleaved", choices=tm.ORDER_CHOICES)
    ap.add_argument("--routing", default="balanced", choices=["balanced", "skewed"])
    ap.add_argument("--backends", default="xstage,torch-bf16,torch-fp8", help="a subset, in this order")
    ap.add_argument("--sets", type=int, default=4, help="routings / activations rotated over the calls")
    ap.add_argument("--warmup-calls", type=int, default=10, help="calls per backend before the protocol")
    ap.add_argument("--warmup-s", type=float, default=0.2, help="the protocol's warm-up before each block")
    ap.add_argument("--block", type=float, default=0.4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args()
    names = tm.check_args(ap, a, KNOWN)
    if "WORLD_SIZE" not in os.environ:
        ap.error("run it under torchrun (one process per GPU), e.g. torchrun --nproc-per-node 2 " + sys.argv[0])

    import torch
    import torch.distributed as dist
    from xstage import bench_protocol as bp
    from xstage.moe import MoeLayer, MoeWeights, moe_reference, quantize_weights
    from xstage.team import Team

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    P, rank = dist.get_world_size(), dist.get_rank()
    group = dist.group.WORLD
    team = Team.from_process_group()
    timer = bp.AgreedTimer(bp.CudaEventTimer(), bp.torch_dist_agree())  # the same calls per block on every rank

    results = []
    rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
    for name in a.shapes.split(","):
        H, I, E, k = tm.SHAPES[name]
        if E % P:
            raise SystemExit(f"torch_moe_ep: {name} has {E} experts, not divisible by the world size {P}")
        T, El = a.tokens, E // P
        mine = slice(rank * El, (rank + 1) * El)
        gen = torch.Generator(device="cuda").manual_seed(a.seed)  # the same weights and batches on every rank
        w1 = (torch.randn(E, 2 * I, H, generator=gen, device="cuda") / H ** 0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, generator=gen, device="cuda") / I ** 0.5).to(torch.bfloat16)
        wq = quantize_weights(w1[mine], w2[mine], "w8a8")
        w1t, w2t = w1[mine].transpose(1, 2), w2[mine].transpose(1, 2)  # _grouped_mm's [G, K, N], K contiguous
        w8 = tm.torch_fp8_weights(w1[mine], w2[mine], torch) if "torch-fp8" in names else None
        sets = []  # (this rank's x, idx, wt) per set, from the global batch every rank draws alike
        r = slice(rank * T, (rank + 1) * T)
        for _ in range(a.sets):
            x = torch.randn(P * T, H, generator=gen, device="cuda").to(torch.bfloat16)
            idx, wt = (tm.routing if a.routing == "balanced" else zipf_routing)(P * T, E, k, gen, torch)
            sets.append((x[r].contiguous(), idx[r].contiguous(), wt[r].contiguous()))
            del x, idx, wt
        layer = MoeLayer(team, H, I, E, k, T, "w8a8")
        order = layer.auto_order()[0] if a.order == "auto" else a.order

        backends = {
            "xstage": lambda s, L=layer, W=wq, o=order: L(s[0], s[1], s[2], W, order=o),
            "torch-bf16": lambda s, F=tm.bf16_linears(w1t, w2t, torch): ep_layer(s[0], s[1], s[2], El, I, *F, group,
                                                                                  torch, dist),
            "torch-fp8": lambda s, F=tm.fp8_linears(w8, torch) if w8 else None: ep_layer(s[0], s[1], s[2], El, I, *F,
                                                                                          group, torch, dist),
        }
        backends = {b: backends[b] for b in names}
        # correctness on the first set: xstage against its own quantization's reference, and every backend against one
        # float64 layer (all experts, the bf16 weights), on the rank's tokens (a token's output depends on its rows only)
        row = {"shape": name, "hidden": H, "inter": I, "experts": E, "topk": k, "tokens_per_rank": T, "ranks": P,
               "routing": a.routing, "order": order}
        outs = {b: fn(sets[0]).double() for b, fn in backends.items()}
        layer.check()
        wall = quantize_weights(w1, w2, "w8a8", keep_reference=True)
        ref = moe_reference(*sets[0], wall)
        exact = moe_reference(*sets[0], wall, exact=True)
        del wall
        wb = MoeWeights("bf16", E, H, I, None, None, None, None, w1, w2)
        ex_b = moe_reference(*sets[0], wb, exact=True)
        fields = [rms(outs["xstage"] - ref), rms(ref - exact), float(torch.isnan(outs["xstage"]).any().item())] \
            if "xstage" in outs else [0.0, 1.0, 0.0]
        fields += [rms(outs[b] - ex_b) / rms(ex_b) if b in outs else -1.0 for b in KNOWN]
        t = torch.tensor(fields, device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the worst rank
        ok = t[0].item() <= 0.25 * t[1].item() and t[2].item() == 0
        row["xstage_correct"] = bool(ok)
        for b, v in zip(KNOWN, t[3:].tolist()):
            if v >= 0:
                row[f"{b.replace('-', '_')}_rel_rms_vs_float64"] = v
        del outs, ref, exact, ex_b, wb
        if not ok:
            if rank == 0:
                print(f"{name}: xstage output MISMATCH against its reference; not timed", flush=True)
            results.append(row)
            continue
        for fn in backends.values():
            for c in range(a.warmup_calls):
                fn(sets[c % len(sets)])
        torch.cuda.synchronize()
        res = bp.run_protocol(backends, sets, warmup_s=a.warmup_s, block_s=a.block, rounds=a.rounds, timer=timer,
                              nvml_device=bp.nvml_index_from_env(local))
        st = res["stats"]
        flat = []
        for b in names:
            flat += [st[b]["median_ms"], st[b]["spread"]]
        flips = [float(bp.ratio(st, "xstage", b)["flipped"]) for b in names if b != "xstage" and "xstage" in names]
        t = torch.tensor(flat + flips, device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # per-rank max: a layer call ends when its slowest rank does
        v = t.tolist()
        flops = 2.0 * T * k * 3 * H * I  # per rank
        for i, b in enumerate(names):
            row[f"{b}_ms"], row[f"{b}_spread"] = v[2 * i], v[2 * i + 1]
            row[f"{b}_tflops_per_gpu"] = flops / (v[2 * i] * 1e-3) / 1e12
        others = [b for b in names if b != "xstage"]
        if "xstage" in names:
            for j, b in enumerate(others):
                row[f"xstage_vs_{b.replace('-', '_')}"] = row[f"{b}_ms"] / row["xstage_ms"]
                row[f"xstage_vs_{b.replace('-', '_')}_flips"] = bool(v[2 * len(names) + j])
        row["protocol"] = res["protocol"]
        results.append(row)
        if rank == 0:
            key = lambda b: b.replace("-", "_")  # noqa: E731
            print(f"== {name} T={T} per rank (H={H} I={I} E={E} k={k}), {a.routing}, {P} real ranks, order {order}",
                  flush=True)
            errs = [f"{b} {row[key(b) + '_rel_rms_vs_float64']:.2e}" for b in names
                    if key(b) + "_rel_rms_vs_float64" in row]
            print("   relative rms against the float64 layer on bf16 inputs: " + ", ".join(errs), flush=True)
            for b in names:
                line = (f"   {b:>11s} {row[b + '_ms']:9.4f} ms  spread {100 * row[b + '_spread']:5.1f} %  "
                        f"{row[b + '_tflops_per_gpu']:7.1f} TFLOP/s per GPU")
                if b != "xstage" and "xstage" in names:
                    line += f"  xstage {row['xstage_vs_' + key(b)]:.3f}x faster"
                    if row["xstage_vs_" + key(b) + "_flips"]:
                        line += " (flips between the ABBA halves)"
                print(line, flush=True)
        del layer, sets, wq, w1t, w2t, w8, backends, w1, w2
        torch.cuda.empty_cache()
    if rank == 0 and a.json:
        Path(a.json).write_text(json.dumps({"command": "torchrun ... " + " ".join(sys.argv), "team": team.label,
                                            "device": f"{torch.cuda.get_device_name()} x{P}",
                                            "torch": torch.__version__, "rows": results}, indent=1, default=str))
    dist.destroy_process_group()
    return 0 if all(r["xstage_correct"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
