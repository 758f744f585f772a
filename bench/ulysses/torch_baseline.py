#!/usr/bin/env python3
"""What a DiT user runs today, against xstage's fused Ulysses layer, in the same processes (real ranks:
one process per GPU under torchrun; the two-GPU study runs it):

    torchrun --nproc-per-node 2 bench/ulysses/torch_baseline.py --seq 8K,16K --heads-per-rank 3,6 --out DIR
    python3 bench/ulysses/torch_baseline.py --emulate 2 --seq 8K,16K --heads-per-rank 3,6 --out DIR   # one GPU

With --emulate P (one process, one GPU, no torchrun) only the checks run, nothing is timed: xstage's layer on an
emulated team of P ranks (the same kernels; peer stores land in this GPU's memory) against what the torch layer
computes per rank (cuDNN SDPA on the rank's heads over the whole sequence, which is what its all-to-alls hand it),
and both against the float64 reference.

Backends per shape (same inputs, same ranks), timed with the project's benchmark protocol
(xstage.bench_protocol; every rank makes the same number of calls per block, agreed with an all-reduce,
because every call waits for the other ranks):
  torch   the xDiT/yunchang way: all_to_all_single for q, k and v (sequence -> heads), torch SDPA with the
          cuDNN backend, all_to_all_single back (heads -> sequence)
  xstage  xstage.ulysses.ulysses_attention (pre-attention all-to-all by SM stores, attention with the
          all-to-all fused into its epilogue, completion wait)
Per shape: both medians (per-rank max), their spreads ((max - min) / median over the blocks) and whether the
ratio flips between the ABBA halves. Check: max |xstage - torch| <= 2^-5 max |torch| on every rank (as
bench/attention's check); both are also compared with a float64 reference on 8 rows per rank (torch_err_vs_f64,
xstage_err_vs_f64: which side is off). Output: a table on rank 0, DIR/torch_baseline.csv and
DIR/torch_baseline.json (written only here). The layout helpers (seq_to_head, head_to_seq) are tested on the CPU
with gloo (tests/ulysses/test_torch_layout.py).
"""
import argparse
import json
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))


def seq_to_head(x, group=None):
    """(B, S/P, H, D) sequence-partitioned -> (B, S, H/P, D) head-partitioned (one all_to_all_single)."""
    import torch
    import torch.distributed as dist
    P = dist.get_world_size(group)
    B, s, H, D = x.shape
    send = x.reshape(B, s, P, H // P, D).permute(2, 1, 0, 3, 4).contiguous()  # (P, s, B, Hp, D): chunk p -> rank p
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)  # recv[p]: rank p's s tokens of my heads
    return recv.permute(2, 0, 1, 3, 4).reshape(B, P * s, H // P, D)


def head_to_seq(o, group=None):
    """(B, S, H/P, D) head-partitioned -> (B, S/P, H, D) sequence-partitioned (one all_to_all_single)."""
    import torch
    import torch.distributed as dist
    P = dist.get_world_size(group)
    B, S, hp, D = o.shape
    s = S // P
    send = o.reshape(B, P, s, hp, D).permute(1, 2, 0, 3, 4).contiguous()  # (P, s, B, Hp, D): rows of rank p
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)  # recv[p]: my rows of rank p's heads
    return recv.permute(2, 1, 0, 3, 4).reshape(B, s, P * hp, D)


def torch_ulysses(q, k, v, attention, group=None):
    """The baseline layer: three all-to-alls in, attention(q, k, v) on (B, S, H/P, D), one all-to-all out."""
    qh, kh, vh = (seq_to_head(t, group) for t in (q, k, v))
    return head_to_seq(attention(qh, kh, vh), group)


def sampled_reference(q_rows, k_full, v_full):
    """float64 attention of some query rows (B, n, H, D) over the whole sequence's keys and values (B, S, H, D),
    softmax scale 1/sqrt(D): the arbiter when the two bf16 layers disagree."""
    import torch
    qd, kd, vd = (t.to(torch.float64) for t in (q_rows, k_full, v_full))
    s = torch.einsum("bqhd,bkhd->bhqk", qd, kd) * qd.shape[-1] ** -0.5
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), vd)


def gather_seq(x, group=None):
    """(B, S/P, H, D) of every rank -> (B, S, H, D), rank-major along the sequence (one all_gather)."""
    import torch
    import torch.distributed as dist
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=1)


def parse_list(text):
    out = []
    for item in text.split(","):
        if not item:
            raise SystemExit(f"torch_baseline: empty item in '{text}'")
        mult = 1024 if item[-1] in "kK" else 1
        digits = item[:-1] if mult > 1 else item
        if not digits.isdigit() or int(digits) < 1:
            raise SystemExit(f"torch_baseline: '{item}' in '{text}' is not a positive whole number (K = x1024)")
        out.append(int(digits) * mult)
    return out


def make_cudnn():
    """torch SDPA with the cuDNN backend on (B, S, H, D) tensors (imports done here, once, not per timed call)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def cudnn(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return o.transpose(1, 2)
    return cudnn


def check_fields(ref, got, q, k_full, v_full, first_row=0):
    """One rank's check: max |got - ref| over 2^-5 max |ref|, and both against the float64 reference on 8 of its
    rows (rows first_row .. first_row + s - 1 of the sequence; all heads) to tell which side is off when the check
    fails (two H200s, s48: it failed from 16K tokens while bench_ulysses' float64 check passed)."""
    import torch
    err = (got.float() - ref.float()).abs().max().item()
    tol = 2 ** -5 * ref.float().abs().max().item()
    idx = torch.linspace(0, ref.shape[1] - 1, 8, device=ref.device).long()
    r64 = sampled_reference(q[:, first_row + idx], k_full, v_full)
    e64 = [(t[:, idx].to(torch.float64) - r64).abs().max().item() for t in (ref, got)]
    return [err / tol, e64[0], e64[1]]


def check_row(M, hp, P, dim, worst):
    """A result row from the per-rank maxima of check_fields."""
    return {"M": M, "heads_per_rank": hp, "heads": hp * P, "head_dim": dim, "ranks": P,
            "worst_err_over_tol": worst[0], "torch_err_vs_f64": worst[1], "xstage_err_vs_f64": worst[2],
            "check": "ok" if worst[0] <= 1 else "MISMATCH"}


def print_row(row):
    t = (f"torch {row['torch_us']:9.1f} us  xstage {row['xstage_us']:9.1f} us  x{row['speedup_vs_torch']:.3f} (spread "
         f"{100 * row['torch_spread']:.1f} / {100 * row['xstage_spread']:.1f} %{', FLIPS' if row['ratio_flips'] else ''})"
         if "torch_us" in row else "not timed (emulated)")
    print(f"{row['M']:7d} {row['heads_per_rank']:3d} {row['heads']:4d}  {t}  {row['check']} (|xstage - torch| / tol "
          f"{row['worst_err_over_tol']:.2f}; vs float64 on 8 rows: torch {row['torch_err_vs_f64']:.1e}, xstage "
          f"{row['xstage_err_vs_f64']:.1e})", flush=True)


def write_outputs(a, rows, summary):
    a.out.mkdir(parents=True, exist_ok=True)
    launcher = "python3" if a.emulate else "torchrun ..."
    summary = dict(summary, all_checks_ok=all(r["check"] == "ok" for r in rows),
                   command=" ".join([launcher, "bench/ulysses/torch_baseline.py"] + [shlex.quote(x) for x in a.argv]),
                   rows=rows)
    (a.out / "torch_baseline.json").write_text(json.dumps(summary, indent=2) + "\n")
    cols = ["M", "heads_per_rank", "heads", "head_dim", "ranks", "torch_us", "xstage_us", "speedup_vs_torch",
            "torch_spread", "xstage_spread", "ratio_flips", "worst_err_over_tol", "torch_err_vs_f64", "xstage_err_vs_f64", "check"]
    with open(a.out / "torch_baseline.csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(str(r.get(c, "")) for c in cols) + "\n")


def emulated(a, shapes):
    """The checks on one GPU: P emulated ranks, nothing timed."""
    import torch
    from xstage.team import Team
    from xstage.ulysses import ulysses_attention
    P = a.emulate
    team = Team.emulated(P)
    cudnn = make_cudnn()
    rows = []
    for M, hp in shapes:
        H, s = hp * P, M // P
        gen = torch.Generator(device="cuda").manual_seed(1234)
        q, k, v = (torch.randn(1, M, H, a.dim, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
        heads = lambda t, r: t[:, :, r * hp:(r + 1) * hp].contiguous()  # noqa: E731  rank r's heads, all tokens
        ref = torch.cat([cudnn(heads(q, r), heads(k, r), heads(v, r)) for r in range(P)], dim=2)
        part = lambda t: [t[:, r * s:(r + 1) * s].contiguous() for r in range(P)]  # noqa: E731
        got = [o.clone() for o in ulysses_attention(part(q), part(k), part(v), team)]
        team.check()
        per_rank = [check_fields(ref[:, r * s:(r + 1) * s], got[r], q, k, v, first_row=r * s) for r in range(P)]
        row = check_row(M, hp, P, a.dim, [max(x[i] for x in per_rank) for i in range(3)])
        rows.append(row)
        print_row(row)
    if a.out:
        write_outputs(a, rows, {"ranks": P, "team": team.label, "timed": False,
                                    "machine": f"{torch.cuda.get_device_name()} (emulated x{P})",
                                    "torch": torch.__version__})
    return rows


def real(a, shapes):
    """One process per GPU (torchrun): the checks, then both layers timed."""
    import torch
    import torch.distributed as dist
    from xstage import bench_protocol as bp
    from xstage.team import Team
    from xstage.ulysses import ulysses_attention

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    P, rank = dist.get_world_size(), dist.get_rank()
    team = Team.from_process_group()
    timer = bp.AgreedTimer(bp.CudaEventTimer(), bp.torch_dist_agree())  # the same calls per block on every rank
    cudnn = make_cudnn()

    rows = []
    for M, hp in shapes:
        H, s = hp * P, M // P
        gen = torch.Generator(device="cuda").manual_seed(1234 + rank)
        q, k, v = (torch.randn(1, s, H, a.dim, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
        ref = torch_ulysses(q, k, v, cudnn)
        got = ulysses_attention(q, k, v, team).clone()
        fields = check_fields(ref, got, q, gather_seq(k), gather_seq(v))
        backends = {"torch": lambda x: torch_ulysses(*x, cudnn), "xstage": lambda x: ulysses_attention(*x, team)}
        for fn in backends.values():
            for _ in range(a.warmup_calls):
                fn((q, k, v))
        res = bp.run_protocol(backends, [(q, k, v)], warmup_s=a.warmup_s, block_s=a.block_s, rounds=a.rounds,
                              timer=timer, nvml_device=bp.nvml_index_from_env(local))
        st = res["stats"]
        flipped = bool(bp.ratio(st, "xstage", "torch")["flipped"])  # the ratio's two ABBA halves on either side of 1
        t = torch.tensor([st["torch"]["median_ms"], st["xstage"]["median_ms"], st["torch"]["spread"],
                          st["xstage"]["spread"], float(flipped), *fields], device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # per-rank max
        row = check_row(M, hp, P, a.dim, t[5:].tolist())
        row.update(torch_us=t[0].item() * 1e3, xstage_us=t[1].item() * 1e3,
                   speedup_vs_torch=t[0].item() / t[1].item(), torch_spread=t[2].item(), xstage_spread=t[3].item(),
                   ratio_flips=bool(t[4].item()), protocol=res["protocol"])
        rows.append(row)
        if rank == 0:
            print_row(row)
    if rank == 0 and a.out:
        write_outputs(a, rows, {"ranks": P, "min_ratio_vs_torch": min(r["speedup_vs_torch"] for r in rows),
                                    "team": team.label, "timed": True,
                                    "machine": f"{torch.cuda.get_device_name()} x{P}", "torch": torch.__version__})
    dist.destroy_process_group()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", default="8K,16K,32K,48K,64K", help="total sequence lengths M")
    ap.add_argument("--heads-per-rank", default="3,6,12")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--emulate", type=int, default=0, metavar="P",
                    help="one process, P ranks emulated on this GPU: the checks only, nothing timed")
    ap.add_argument("--warmup-calls", type=int, default=10, help="calls per backend before the protocol")
    ap.add_argument("--warmup-s", type=float, default=0.2, help="the protocol's warm-up before each block")
    ap.add_argument("--block-s", type=float, default=0.4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    shapes = [(M, hp) for M in parse_list(a.seq) for hp in parse_list(a.heads_per_rank)]
    if a.emulate < 0:
        raise SystemExit(f"torch_baseline: --emulate {a.emulate}: the number of emulated ranks must be >= 1")
    for name, v, lo in (("--dim", a.dim, 1), ("--warmup-calls", a.warmup_calls, 0), ("--rounds", a.rounds, 1)):
        if v < lo:
            raise SystemExit(f"torch_baseline: {name} {v}: must be >= {lo}")
    if not 0 < a.block_s <= 3600:  # (NaN fails it too)
        raise SystemExit(f"torch_baseline: --block-s {a.block_s}: must be in (0, 3600] s")
    P = a.emulate if a.emulate else int(os.environ.get("WORLD_SIZE", "1"))
    for M, hp in shapes:
        if P < 1 or M % P:
            raise SystemExit(f"torch_baseline: sequence length {M} is not divisible by the world size {P}")
    rows = emulated(a, shapes) if a.emulate else real(a, shapes)
    return 0 if all(r["check"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
