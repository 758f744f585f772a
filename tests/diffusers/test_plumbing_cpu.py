"""CPU test of the xstage diffusers backend's plumbing with real diffusers and torch, xstage's kernels replaced
by torch stand-ins: registration ("xstage" accepted by set_attention_backend and enable_parallelism), the
layout diffusers hands the backend ((batch, seq, heads, dim)), which path each Flux/Wan attention call takes,
fallbacks to the native backend on CPU tensors, and, with 2 gloo processes under diffusers' Ulysses context
parallelism, that the backend receives each rank's sequence shard and its output goes back in place (one
team per process group). Skipped when torch or diffusers is missing (label cpu)."""
import copy
import os
import socket
import sys
import types
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "python"), str(HERE)]
import xstage.attention as xattn  # noqa: E402
import xstage.diffusers_backend as xd  # noqa: E402
from dit_cases import flux_case, forward, patch_logger_warning_once, prepared, wan_case  # noqa: E402

FAKE_CALLS = {"flash": [], "ulysses": []}


def _sdpa_bshd(q, k, v, scale=None):
    o = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2).float(), k.transpose(1, 2).float(),
                                                         v.transpose(1, 2).float(), scale=scale)
    return o.transpose(1, 2).to(q.dtype)


def fake_flash_attn_fwd(q, k, v, softmax_scale=None, causal=False, return_lse=False, out=None):
    assert q.dim() == 4 and q.stride(-1) == 1 and not causal and not return_lse
    FAKE_CALLS["flash"].append((tuple(q.shape), tuple(k.shape)))
    return _sdpa_bshd(q, k, v, softmax_scale)


def fake_ulysses_attention(q, k, v, team, softmax_scale=None):
    """Reference Ulysses semantics: this rank's (B, S/P, H, D) in, attention over the concatenated shards."""
    import torch.distributed as dist
    assert q.is_contiguous() and q.shape == k.shape == v.shape
    FAKE_CALLS["ulysses"].append(tuple(q.shape))
    full = []
    for t in (q, k, v):
        parts = [torch.empty_like(t) for _ in range(team.world)]
        dist.all_gather(parts, t, group=team.group)
        full.append(torch.cat(parts, dim=1))
    s = q.shape[1]
    r = dist.get_rank(team.group)
    return _sdpa_bshd(*full, scale=softmax_scale)[:, r * s:(r + 1) * s]


class FakeTeam:
    made = 0

    def __init__(self, group):
        import torch.distributed as dist
        FakeTeam.made += 1
        self.group, self.world = group, dist.get_world_size(group)


def install_fakes(mp=None):
    """xstage's kernels -> torch stand-ins; CPU tensors pass for an sm_90 GPU."""
    real_describe = xd.describe

    def describe(*a, **kw):
        c = real_describe(*a, **kw)
        return xd.replace_call(c, device_type="cuda", capability=(9, 0)) if c.device_type == "cpu" else c

    ulysses = types.ModuleType("xstage.ulysses")
    ulysses.ulysses_attention = fake_ulysses_attention
    from xstage import team as xteam
    sets = [(xd, "describe", describe), (xattn, "_load", lambda: None),
            (xattn, "flash_attn_fwd", fake_flash_attn_fwd),
            (xteam.Team, "from_process_group", classmethod(lambda cls, group=None: FakeTeam(group)))]
    for obj, name, val in sets:
        if mp is not None:
            mp.setattr(obj, name, val)
        else:
            setattr(obj, name, val)
    if mp is not None:
        mp.setitem(sys.modules, "xstage.ulysses", ulysses)
    else:
        sys.modules["xstage.ulysses"] = ulysses


@pytest.fixture
def fakes(monkeypatch):
    install_fakes(monkeypatch)
    for v in FAKE_CALLS.values():
        v.clear()
    xd.reset_stats()
    yield
    xd.close_teams()


CASES = {"flux": lambda: flux_case(head_dim=128, heads=4, s_img=300, s_txt=20),
         "wan": lambda: wan_case(head_dim=64, heads=4, frames=2, height=16, width=16, s_txt=20)}


@pytest.mark.parametrize("name", CASES)
def test_models_take_the_xstage_path(name, fakes):
    model, inputs, calls = CASES[name]()
    m16, i16, _, _ = prepared(model, inputs, "cpu")
    m16.set_attention_backend("native")
    nat = forward(m16, i16)
    xd.enable(m16)
    xd.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error", xd.XstageFallbackWarning)
        x = forward(m16, i16)
    s = xd.stats()
    assert (s["flash"], s["ulysses"], s["native"]) == (calls["self"] + calls["cross"], 0, 0), s
    assert len(FAKE_CALLS["flash"]) == s["flash"]
    rel = ((x - nat).norm() / nat.norm()).item()
    assert rel < 1e-2, rel


def test_dispatch_layout_is_bshd(fakes):
    from diffusers.models.attention_dispatch import dispatch_attention_fn
    xd.register()
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 37, 3, 64, generator=g, dtype=torch.bfloat16)
    k = torch.randn(2, 19, 3, 64, generator=g, dtype=torch.bfloat16)
    v = torch.randn(2, 19, 3, 64, generator=g, dtype=torch.bfloat16)
    x = dispatch_attention_fn(q, k, v, scale=0.2, backend="xstage")
    n = dispatch_attention_fn(q, k, v, scale=0.2, backend="native")
    assert FAKE_CALLS["flash"] == [((2, 37, 3, 64), (2, 19, 3, 64))]
    assert x.shape == n.shape == q.shape
    assert (x.float() - n.float()).abs().max().item() < 2e-2


def test_cpu_tensors_fall_back_with_one_warning():
    from diffusers.models.attention_dispatch import dispatch_attention_fn
    xd.register()
    xd.reset_stats()
    q = torch.randn(1, 16, 2, 64, dtype=torch.bfloat16)
    with pytest.warns(xd.XstageFallbackWarning, match="device"):
        a = dispatch_attention_fn(q, q, q, backend="xstage")
    with warnings.catch_warnings():
        warnings.simplefilter("error", xd.XstageFallbackWarning)
        b = dispatch_attention_fn(q, q, q, backend="xstage")     # warned once
    n = dispatch_attention_fn(q, q, q, backend="native")
    assert torch.equal(a, n) and torch.equal(b, n)
    assert xd.stats()["fallbacks"] == {"device": 2}


@pytest.mark.parametrize("kw,reason", [({"attn_mask": "mask"}, "mask"), ({"is_causal": True}, "causal"),
                                       ({"dtype": torch.float32}, "dtype"), ({"dim": 96}, "head_dim"),
                                       ({"grad": True}, "autograd")])
def test_fallback_reasons_through_dispatch(fakes, kw, reason):
    from diffusers.models.attention_dispatch import dispatch_attention_fn
    xd.register()
    dtype, dim = kw.get("dtype", torch.bfloat16), kw.get("dim", 64)
    q = torch.randn(1, 16, 2, dim, dtype=dtype, requires_grad=kw.get("grad", False))
    mask = torch.ones(1, 1, 16, 16, dtype=torch.bool) if "attn_mask" in kw else None
    with pytest.warns(xd.XstageFallbackWarning, match=reason):
        x = dispatch_attention_fn(q, q, q, attn_mask=mask, is_causal=kw.get("is_causal", False), backend="xstage")
    n = dispatch_attention_fn(q, q, q, attn_mask=mask, is_causal=kw.get("is_causal", False), backend="native")
    assert torch.equal(x, n)
    assert xd.stats()["fallbacks"] == {reason: 1} and not FAKE_CALLS["flash"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cp_worker(rank, world, port):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.accelerator.device_count = lambda: 1     # diffusers picks rank % device_count; CPU-only torch says 0
    from diffusers import ContextParallelConfig
    install_fakes()
    patch_logger_warning_once()
    try:
        for name, make in (("flux", lambda: flux_case(head_dim=128, heads=4, s_img=320, s_txt=24)),
                           ("wan", lambda: wan_case(head_dim=64, heads=4, frames=2, height=16, width=16, s_txt=20))):
            model, inputs, calls = make()
            m16, i16, _, _ = prepared(model, inputs, "cpu")
            m16.set_attention_backend("native")
            nat = forward(m16, i16)                                    # whole sequence on every rank
            mx = copy.deepcopy(m16)
            xd.enable(mx)
            mx.enable_parallelism(config=ContextParallelConfig(ulysses_degree=world))
            xd.reset_stats()
            FAKE_CALLS["ulysses"].clear()
            with warnings.catch_warnings():
                warnings.simplefilter("error", xd.XstageFallbackWarning)
                x = forward(mx, i16)
                x2 = forward(mx, i16)
            s = xd.stats()
            assert (s["ulysses"], s["flash"], s["native"]) == (2 * calls["self"], 2 * calls["cross"], 0), (name, s)
            # each rank saw its shard: Flux (txt + img) / P tokens, Wan frames*h*w/4 / P tokens
            seq = {"flux": (24 + 320) // world, "wan": 2 * 8 * 8 // world}[name]
            assert all(sh[1] == seq for sh in FAKE_CALLS["ulysses"]), (name, FAKE_CALLS["ulysses"][:2])
            rel = ((x - nat).norm() / nat.norm()).item()
            assert x.shape == nat.shape and rel < 1e-2, (name, rel)
            assert torch.equal(x, x2), name
        assert FakeTeam.made == 1, FakeTeam.made                       # one team per process group, cached
    finally:
        dist.destroy_process_group()


def test_ulysses_context_parallel_two_gloo_ranks():
    """Two processes (this file as a script), gloo, no GPU visible: diffusers' mesh is then on the CPU."""
    import subprocess
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    port, world = _free_port(), 2
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    procs = [subprocess.Popen([sys.executable, __file__, str(r), str(world), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(p.communicate()[0] + "\nTIMEOUT")
    for r, (p, o) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{o[-4000:]}"
        assert "CP OK" in o, o[-2000:]


if __name__ == "__main__":
    _cp_worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
    print("CP OK")
