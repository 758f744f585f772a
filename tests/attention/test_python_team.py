"""GPU tests of xstage.team: teams from Python (emulated, and real from a torch.distributed group of one
process), symmetric buffers as torch tensors, and the attention whose epilogue stores every tile to its
destination rank (skipped without torch or an sm_90 GPU). Exact: the gathered peer-store output equals
flash_attn_fwd's local output bit for bit."""
import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from torch_sm90 import torch  # noqa: E402  (skips the module without torch or an sm_90 GPU)

from xstage.attention import XstageError, flash_attn_fwd  # noqa: E402
from xstage.team import Team, attn_fwd_to_peers  # noqa: E402

SEED = int(os.environ.get("XSTAGE_TEST_SEED", "20261201"))


def gathered_reference(q, k, v, world, batch, spr):
    """What rank d must hold: rows d*spr.. of every source s's heads, heads of s at s*h.."""
    o = flash_attn_fwd(q, k, v)  # (world_local * batch, S, h, d)
    g, S, h, d = o.shape
    ref = []
    for dst in range(world):
        parts = [o[s * batch:(s + 1) * batch, dst * spr:(dst + 1) * spr] for s in range(world)]
        ref.append(torch.cat(parts, dim=2))  # (batch, spr, world*h, d)
    return ref


@pytest.mark.parametrize("world,batch,spr,heads,dim,dtype", [
    (2, 1, 100, 2, 128, torch.bfloat16), (4, 2, 256, 1, 64, torch.float16), (8, 1, 64, 3, 128, torch.bfloat16)])
def test_emulated_peer_store_equals_local(world, batch, spr, heads, dim, dtype):
    gen = torch.Generator(device="cuda").manual_seed(SEED + world)
    team = Team.emulated(world)
    assert team.world == world and team.local_ranks == world and team.is_emulated
    assert "no NVLink" in team.label
    S = world * spr
    q, k, v = (torch.randn(world * batch, S, heads, dim, generator=gen, device="cuda").to(dtype) for _ in range(3))
    out = team.buffer((batch, spr, world * heads, dim), dtype)
    for r in range(world):
        out.tensor(r).view(torch.int16).fill_(-1)  # poison (NaN pattern)
    attn_fwd_to_peers(q, k, v, team, out, spr)
    team.check("peer-store attention")
    ref = gathered_reference(q, k, v, world, batch, spr)
    for r in range(world):
        assert torch.equal(out.tensor(r).view(torch.int16), ref[r].contiguous().view(torch.int16)), f"rank {r}"
    # A second call (epoch 2) waits for the new signals and rewrites everything.
    for r in range(world):
        out.tensor(r).view(torch.int16).fill_(-1)
    attn_fwd_to_peers(q, k, v, team, out, spr)
    team.check("peer-store attention, epoch 2")
    for r in range(world):
        assert torch.equal(out.tensor(r).view(torch.int16), ref[r].contiguous().view(torch.int16)), f"rank {r}"


def test_peer_store_is_ordered_on_torchs_stream():
    """attn_fwd_to_peers runs on torch's current stream: a poison written there after a long sleep lands before
    the tiles, and inputs written after it are the ones read."""
    world, spr, heads, dim = 2, 256, 2, 128
    gen = torch.Generator(device="cuda").manual_seed(SEED + 23)
    team = Team.emulated(world)
    src = [torch.randn(world, world * spr, heads, dim, generator=gen, device="cuda").to(torch.bfloat16)
           for _ in range(3)]
    q, k, v = (torch.full_like(t, float("nan")) for t in src)
    out = team.buffer((1, spr, world * heads, dim), torch.bfloat16)
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)  # ~50 ms on the current stream
    for dst, t in zip((q, k, v), src):
        dst.copy_(t)
    for r in range(world):
        out.tensor(r).view(torch.int16).fill_(-1)
    attn_fwd_to_peers(q, k, v, team, out, spr)
    team.check("peer-store attention after a sleep")
    ref = gathered_reference(*src, world, 1, spr)
    for r in range(world):
        assert torch.equal(out.tensor(r).view(torch.int16), ref[r].contiguous().view(torch.int16)), f"rank {r}"


def test_buffer_zeros_land_before_side_stream_work():
    """A new team buffer's zero fill has finished when team.buffer returns: it runs behind the default stream's work
    (here a 50 ms sleep), and torch's side streams are not ordered after that stream, so a fill there must not be
    overwritten by the zeros afterwards."""
    team = Team.emulated(2)
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)  # ~50 ms on the default stream
    buf = team.buffer((1024, 256), torch.float32)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for r in range(2):
            buf.tensor(r).fill_(1.0)
    torch.cuda.synchronize()
    for r in range(2):
        assert bool((buf.tensor(r) == 1.0).all()), f"rank {r}: the zero fill landed after the side stream's writes"


def test_real_team_of_one_from_process_group():
    import torch.distributed as dist
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            team = Team.from_process_group()
            assert (team.world, team.first_rank, team.local_ranks, team.is_emulated) == (1, 0, 1, False)
            gen = torch.Generator(device="cuda").manual_seed(SEED)
            q, k, v = (torch.randn(1, 300, 2, 128, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
            out = team.buffer((1, 300, 2, 128), torch.bfloat16)
            attn_fwd_to_peers(q, k, v, team, out, 300)
            team.check()
            assert torch.equal(out.tensor().view(torch.int16), flash_attn_fwd(q, k, v).view(torch.int16))
        finally:
            dist.destroy_process_group()


def test_errors_are_named():
    with pytest.raises(XstageError, match="got 0"):
        Team.emulated(0)
    with pytest.raises(XstageError, match="got 9"):
        Team.emulated(9)
    with pytest.raises(RuntimeError, match="not initialised"):
        Team.from_process_group()
    team = Team.emulated(2)
    q = torch.randn(2, 200, 1, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(XstageError, match="seqlen_q 200 must be world"):
        _bad_spr(q, team)
    with pytest.raises(ValueError, match="out must be"):
        attn_fwd_to_peers(q, q, q, team, team.buffer((1, 50, 2, 64), torch.bfloat16), 100)
    with pytest.raises(ValueError, match="world must be an int, got 2.0"):
        Team.emulated(2.0)
    with pytest.raises(ValueError, match=r"buffer shape \(4, 0\) must be positive"):
        team.buffer((4, 0), torch.float32)
    with pytest.raises(XstageError, match="5"):
        team.buffer((4,), torch.float32).tensor(5)  # a rank this process does not serve
    q3 = torch.randn(3, 200, 1, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(XstageError, match="batch 3 is not a multiple of the 2 ranks served here"):
        attn_fwd_to_peers(q3, q3, q3, team, team.buffer((1, 100, 2, 64), torch.bfloat16), 100)


def _bad_spr(q, team):
    out = team.buffer((1, 99, 2, 64), torch.bfloat16)
    attn_fwd_to_peers(q, q, q, team, out, 99)


def _peer_call(team, world, spr, heads, dim, gen, poison=True):
    """One attn_fwd_to_peers call on fresh inputs with a poisoned output; returns (out, reference)."""
    q, k, v = (torch.randn(world, world * spr, heads, dim, generator=gen, device="cuda").to(torch.bfloat16)
               for _ in range(3))
    out = team.buffer((1, spr, world * heads, dim), torch.bfloat16)
    for r in range(world):
        out.tensor(r).view(torch.int16).fill_(-1)
    attn_fwd_to_peers(q, k, v, team, out, spr)
    return out, gathered_reference(q, k, v, world, 1, spr)


def test_calls_of_different_shapes_and_refused_calls_follow_each_other():
    """The completion target counts the CTAs every call launched: a call with few tiles after one with many, and the
    reverse, both complete (the target was epoch x this call's CTAs: the reverse order timed out), and a refused call
    counts for nothing (its epoch used to be spent, so the next call waited for a call that never ran)."""
    world, heads, dim = 2, 2, 128
    gen = torch.Generator(device="cuda").manual_seed(SEED + 41)
    team = Team.emulated(world, timeout_s=2.0)
    for spr in (64, 2048, 64, 1024):  # CTAs per rank: few, all the SMs a rank has, few, many
        out, ref = _peer_call(team, world, spr, heads, dim, gen)
        team.check(f"seq_per_rank {spr}")
        for r in range(world):
            assert torch.equal(out.tensor(r).view(torch.int16), ref[r].contiguous().view(torch.int16)), (spr, r)
        q = torch.randn(world, 200, 1, 64, device="cuda").to(torch.bfloat16)
        with pytest.raises(XstageError, match="seqlen_q 200 must be world"):
            _bad_spr(q, team)  # refused by the library: counts for nothing
    # an explicit epoch is checked against the team's own count: 4 calls ran, so the next is number 5
    q, k, v = (torch.randn(world, world * 64, heads, dim, generator=gen, device="cuda").to(torch.bfloat16)
               for _ in range(3))
    out = team.buffer((1, 64, world * heads, dim), torch.bfloat16)
    with pytest.raises(XstageError, match="epoch 9: this team has run 4 peer-store attention calls, so this one is "
                                          "number 5"):
        attn_fwd_to_peers(q, k, v, team, out, 64, epoch=9)
    attn_fwd_to_peers(q, k, v, team, out, 64, epoch=5)
    team.check("epoch 5")
    ref = gathered_reference(q, k, v, world, 1, 64)
    for r in range(world):
        assert torch.equal(out.tensor(r).view(torch.int16), ref[r].contiguous().view(torch.int16)), r


def test_peer_store_inputs_checked_before_any_work():
    """attn_fwd_to_peers checks q, k, v as flash_attn_fwd does: a float32 q ran as fp16 (wrong numbers), a negative
    scale became the default 1/sqrt(d), a CPU q handed the kernel a host pointer."""
    world, spr, heads, dim = 2, 64, 1, 64
    team = Team.emulated(world)
    out = team.buffer((1, spr, world * heads, dim), torch.bfloat16)
    q = torch.randn(world, world * spr, heads, dim, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="q.dtype = torch.float32 is not supported"):
        attn_fwd_to_peers(q.float(), q.float(), q.float(), team, out, spr)
    with pytest.raises(ValueError, match="softmax_scale = -0.5 must be a positive finite number"):
        attn_fwd_to_peers(q, q, q, team, out, spr, softmax_scale=-0.5)
    with pytest.raises(ValueError, match="softmax_scale = 1e-50 is 0.0 as the float32"):
        attn_fwd_to_peers(q, q, q, team, out, spr, softmax_scale=1e-50)
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        attn_fwd_to_peers(q.cpu(), q, q, team, out, spr)
    with pytest.raises(ValueError, match="k.dtype = torch.float16 differs"):
        attn_fwd_to_peers(q, q.half(), q, team, out, spr)
    with pytest.raises(ValueError, match="out must be a buffer of this team"):
        attn_fwd_to_peers(q, q, q, team, Team.emulated(world).buffer((1, spr, world * heads, dim), torch.bfloat16),
                          spr)
    with pytest.raises(ValueError, match="epoch must be None or a whole number"):
        attn_fwd_to_peers(q, q, q, team, out, spr, epoch=-1)
    # nothing ran: the next call is the team's first
    attn_fwd_to_peers(q, q, q, team, out, spr, epoch=1)
    team.check("the first call after refused ones")


def test_close_closes_what_was_made_on_the_team():
    """Team.close() frees its buffers first (the library's buffers must not outlive their team); they then refuse
    use by name instead of touching freed memory. A negative device is the current one."""
    team = Team.emulated(2, device=-1)
    assert team.device == torch.cuda.current_device()
    buf = team.buffer((4, 64), torch.float32)
    assert buf.tensor(0).device == torch.device("cuda", team.device)
    team.close()
    assert not buf._h.value, "the buffer was not closed with its team"
    with pytest.raises(XstageError, match="buffer is null"):
        buf.tensor(0)


def test_a_team_in_a_reference_cycle_frees_its_buffers_first(monkeypatch):
    """A team and its buffer that die together in a reference cycle: the collector clears weak references before it
    runs finalizers, in any order, so the team must hold its children's handles strongly to free them first (a buffer
    or layer freed after its team touches freed memory; with real ranks, a destroyed NCCL communicator)."""
    import gc

    from xstage import team as xt
    gc.collect()  # (earlier tests' garbage is freed before the recording starts)
    lib, calls = xt._lib(), []
    for name in ("xstage_buffer_free", "xstage_team_destroy"):
        real = getattr(lib, name)
        monkeypatch.setattr(lib, name, lambda h, real=real, name=name: (calls.append(name), real(h))[1], raising=False)
    for _ in range(4):  # the collector's order differs between runs; each must free the buffer first
        calls.clear()
        team = Team.emulated(2)
        buf = team.buffer((16,), torch.float32)
        team._cycle, buf._cycle = buf, team
        del team, buf
        gc.collect()
        assert calls == ["xstage_buffer_free", "xstage_team_destroy"], calls
