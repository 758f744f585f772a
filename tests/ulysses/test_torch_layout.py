"""CPU test (gloo, 2 and 4 processes, float64) of the torch baseline's Ulysses layout: the all-to-alls of
bench/ulysses/torch_baseline.py around a plain attention equal that attention on the gathered tensors, and so does
its float64 arbiter on sampled rows (sampled_reference over gather_seq's keys and values).
Skipped when torch is missing."""
import os
import sys
import tempfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "ulysses"))
import torch_baseline  # noqa: E402


def attention(q, k, v):  # (B, S, H, D), float64
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)


def _rank(rank, world, store, spr, heads, result):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    gen = torch.Generator().manual_seed(7)
    S = world * spr
    full = [torch.randn(2, S, heads, 8, generator=gen, dtype=torch.float64) for _ in range(3)]
    mine = [t[:, rank * spr:(rank + 1) * spr].contiguous() for t in full]
    out = torch_baseline.torch_ulysses(*mine, attention)
    want = attention(*full)[:, rank * spr:(rank + 1) * spr]
    # the baseline's float64 arbiter: sampled rows of this rank over the gathered keys and values
    rows = torch.tensor([0, spr - 1])
    r64 = torch_baseline.sampled_reference(mine[0][:, rows], torch_baseline.gather_seq(mine[1]),
                                           torch_baseline.gather_seq(mine[2]))
    result[rank] = max(float((out - want).abs().max()), float((r64 - want[:, rows]).abs().max()))
    dist.destroy_process_group()


@pytest.mark.parametrize("world,spr,heads", [(2, 5, 4), (4, 3, 8)])
def test_layout_matches_single_process(world, spr, heads):
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        result = mp.Manager().dict()
        mp.spawn(_rank, args=(world, os.path.join(d, "store"), spr, heads, result), nprocs=world, join=True)
        assert len(result) == world
        assert max(result.values()) < 1e-12, dict(result)
