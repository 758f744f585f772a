"""Worker of test_python_moe.py's two-GPU test, under `torchrun --nproc-per-node 2` (one process per GPU, NCCL):
a real team from the process group, each rank its tokens and its experts; its output must equal, bit for bit, its
slice of the same global batch run by this process alone on an emulated team of one rank (all experts), and lie
within the tests' tolerance of the float64 reference; with the dispatch plan made on the devices (the counts exchanged
by peer stores) and on the host (the routing all-gathered); and a call with fewer tokens than the capacity, a different
count per rank. Rank 0 prints "PASS all" when every rank passed."""
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from xstage.moe import MoeLayer, moe_reference, quantize_weights  # noqa: E402
from xstage.team import Team  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from moe_cases import make_inputs  # noqa: E402


def main():
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    H, I, E, k, T = 512, 256, 8 * world, 4, 192
    for fmt, plan in (("w8a8", "device"), ("w8a8", "host"), ("w4a8", "device")):
        # the same global batch on every rank; skewed: rank 0's experts popular
        x, w1, w2, idx, wt = make_inputs(world * T, H, I, E, k, 20261204, skewed=True)
        el = E // world
        mine = slice(rank * T, (rank + 1) * T)
        real = MoeLayer(Team.from_process_group(), H, I, E, k, T, fmt)
        w_mine = quantize_weights(w1[rank * el:(rank + 1) * el], w2[rank * el:(rank + 1) * el], fmt)
        out = real(x[mine].contiguous(), idx[mine].contiguous(), wt[mine].contiguous(), w_mine, plan=plan)
        real.check()
        w_all = quantize_weights(w1, w2, fmt, keep_reference=True)
        one = MoeLayer(Team.emulated(1), H, I, E, k, world * T, fmt)(x, idx, wt, w_all)
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int32), one[mine].view(torch.int32)), \
            f"{fmt} {plan} plan, rank {rank}: the real team's output differs from its slice of the one-GPU run"
        ref, exact = moe_reference(x, idx, wt, w_all)[mine], moe_reference(x, idx, wt, w_all, exact=True)[mine]
        rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
        err, own = out.double() - ref, ref - exact
        assert rms(err) <= 0.25 * rms(own), f"{fmt} rank {rank}: rms {rms(err):.3e} vs the reference's own {rms(own):.3e}"
        print(f"rank {rank} {fmt}, {plan} plan: bit-identical to the one-GPU run; rel rms {rms(err) / rms(ref):.2e}",
              flush=True)
    # Fewer tokens than the capacity, a different count per rank (device plan): rank r passes T - 37 r of its tokens;
    # its rows must equal the one-GPU run of every rank's passed tokens as one batch.
    x, w1, w2, idx, wt = make_inputs(world * T, H, I, E, k, 20261205, skewed=True)
    el = E // world
    n = [T - 37 * r for r in range(world)]
    mine = slice(rank * T, rank * T + n[rank])
    real = MoeLayer(Team.from_process_group(), H, I, E, k, T)
    w_mine = quantize_weights(w1[rank * el:(rank + 1) * el], w2[rank * el:(rank + 1) * el], "w8a8")
    out = real(x[mine].contiguous(), idx[mine].contiguous(), wt[mine].contiguous(), w_mine)
    real.check()
    rows = torch.cat([torch.arange(r * T, r * T + n[r]) for r in range(world)]).cuda()
    w_all = quantize_weights(w1, w2, "w8a8")
    one = MoeLayer(Team.emulated(1), H, I, E, k, sum(n))(x[rows], idx[rows], wt[rows], w_all)
    torch.cuda.synchronize()
    at = sum(n[:rank])
    assert out.shape[0] == n[rank] and torch.equal(out.view(torch.int32), one[at:at + n[rank]].view(torch.int32)), \
        f"rank {rank}: {n[rank]} of {T} tokens differ from the one-GPU run of the ranks' tokens as one batch"
    print(f"rank {rank} w8a8, device plan, {n[rank]} of {T} tokens: bit-identical to the one-GPU run", flush=True)
    ok = torch.ones(1, device="cuda")
    dist.all_reduce(ok)
    if rank == 0 and int(ok.item()) == world:
        print("PASS all", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
