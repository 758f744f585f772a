"""GPU tests of xstage.ulysses on torch tensors (skipped without torch or an sm_90 GPU): an emulated team
of P ranks, fused output equal to serial and to flash_attn_fwd on the gathered tensors, bit for bit;
a real team of one process from a torch.distributed group; argument errors."""
import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from torch_sm90 import torch  # noqa: E402  (skips the module without torch or an sm_90 GPU)

from xstage.attention import XstageError, flash_attn_fwd  # noqa: E402
from xstage.team import Team  # noqa: E402
from xstage.ulysses import SERIAL, UlyssesAttention, ulysses_attention  # noqa: E402

SEED = int(os.environ.get("XSTAGE_TEST_SEED", "20261201"))


@pytest.mark.parametrize("world,spr,heads,dim,dtype", [(2, 300, 4, 128, torch.bfloat16),
                                                       (4, 256, 4, 64, torch.float16),
                                                       (8, 100, 24, 128, torch.bfloat16)])
def test_emulated_layer_equals_single_gpu(world, spr, heads, dim, dtype):
    gen = torch.Generator(device="cuda").manual_seed(SEED + world)
    team = Team.emulated(world)
    S = world * spr
    q, k, v = (torch.randn(1, S, heads, dim, generator=gen, device="cuda").to(dtype) for _ in range(3))
    ref = flash_attn_fwd(q, k, v)
    slices = lambda t: [t[:, r * spr:(r + 1) * spr].contiguous() for r in range(world)]  # noqa: E731
    fused = [o.clone() for o in ulysses_attention(slices(q), slices(k), slices(v), team)]
    serial = [o.clone() for o in ulysses_attention(slices(q), slices(k), slices(v), team, variant=SERIAL)]
    team.check()
    for r in range(world):
        assert torch.equal(fused[r].view(torch.int16), serial[r].view(torch.int16)), f"rank {r}: fused != serial"
        want = ref[:, r * spr:(r + 1) * spr].contiguous()
        assert torch.equal(fused[r].view(torch.int16), want.view(torch.int16)), f"rank {r}: != single GPU"


@pytest.mark.parametrize("side_stream", [False, True])
def test_layer_is_ordered_on_torchs_stream(side_stream):
    """The layer runs on torch's current stream (the default one, or a side stream): inputs written there after a
    long sleep are the ones it reads, and a clone right after the call copies its finished output. (Until s49 the
    C ABI ran a NULL stream, torch's default, on the team's own stream: unordered with torch's work.)"""
    world, spr, heads, dim = 2, 1024, 4, 128
    gen = torch.Generator(device="cuda").manual_seed(SEED + 17)
    team = Team.emulated(world)
    full = [torch.randn(1, world * spr, heads, dim, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3)]
    ref = flash_attn_fwd(*full)
    ins = [[torch.full((1, spr, heads, dim), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(world)]
           for _ in range(3)]
    torch.cuda.synchronize()
    stream = torch.cuda.Stream() if side_stream else torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(100_000_000)  # ~50 ms on this stream: work not ordered after it would read the NaNs
        for dst, src in zip(ins, full):
            for r in range(world):
                dst[r].copy_(src[:, r * spr:(r + 1) * spr])
        out = [o.clone() for o in ulysses_attention(*ins, team)]
        team.check()
    torch.cuda.synchronize()
    for r in range(world):
        want = ref[:, r * spr:(r + 1) * spr].contiguous()
        assert torch.equal(out[r].view(torch.int16), want.view(torch.int16)), f"rank {r}"


def test_real_team_of_one():
    import torch.distributed as dist
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            team = Team.from_process_group()
            gen = torch.Generator(device="cuda").manual_seed(SEED)
            q, k, v = (torch.randn(2, 500, 3, 64, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
            out = ulysses_attention(q, k, v, team)
            assert torch.equal(out.view(torch.int16), flash_attn_fwd(q, k, v).view(torch.int16))
        finally:
            dist.destroy_process_group()


def test_errors_are_named():
    team = Team.emulated(4)
    with pytest.raises(XstageError, match="heads = 6 is not divisible by the world size 4"):
        UlyssesAttention(team, 1, 64, 6, 128, torch.bfloat16)
    layer = UlyssesAttention(team, 1, 64, 8, 128, torch.bfloat16)
    x = [torch.randn(1, 64, 8, 128, device="cuda").to(torch.bfloat16) for _ in range(4)]
    with pytest.raises(ValueError, match="serves 4 ranks"):
        layer(x[:3], x, x)
    with pytest.raises(ValueError, match="shape"):
        layer([t[:, :32] for t in x], x, x)

