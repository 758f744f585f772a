"""GPU tests of the xstage diffusers backend (label gpu): small randomly initialised Flux and Wan transformers
(built from a config, no download) in bf16 run with diffusers' native attention and with "xstage", both
compared with a float32 native run; the xstage error must stay within twice the native bf16 error. Also the
dispatcher on plain tensors, fallbacks, the Ulysses path at one rank, and 2 ranks under torchrun (skipped
unless 2 GPUs are present). Skipped without torch, diffusers, CUDA, an sm_90 GPU or libxstage_attention."""
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip(f"xstage's kernel is sm_90a; this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}",
                allow_module_level=True)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "python"), str(HERE)]
import xstage.attention as xattn  # noqa: E402
import xstage.diffusers_backend as xd  # noqa: E402
from dit_cases import compare, flux_case, forward, prepared, wan_case  # noqa: E402

xattn._load()  # a missing or broken library fails the module, as in the other GPU modules (no skip)

import diffusers  # noqa: E402
from diffusers.models.attention_dispatch import dispatch_attention_fn  # noqa: E402

DEV = "cuda"
print(f"diffusers {diffusers.__version__} (read: {xd.DIFFUSERS_VERSION_READ}), torch {torch.__version__}")

MODELS = {
    "flux-d128": lambda: flux_case(head_dim=128, heads=8, s_img=1000, s_txt=77),
    "flux-d64": lambda: flux_case(head_dim=64, heads=6, s_img=640, s_txt=33, batch=2),
    "wan-d64": lambda: wan_case(head_dim=64, heads=8, frames=3, height=24, width=32, s_txt=77),
    "wan-d128": lambda: wan_case(head_dim=128, heads=4, frames=2, height=32, width=32, s_txt=40, batch=2),
}


@pytest.fixture(autouse=True)
def _strict_off():
    xd.reset_stats()
    yield
    xd.reset_stats()


def _per_call_check(record, what):
    """Each recorded call (the q/k/v the model actually handed the kernel: strides, joint concatenation,
    cross-attention lengths) against fp32 and bf16 SDPA on the same inputs: model outputs alone hardly see
    attention errors in a randomly initialised model (its attention is near uniform)."""
    for i, (q, k, v, scale, out) in enumerate(record):
        nat = dispatch_attention_fn(q, k, v, scale=scale, backend="native").float()
        ref = dispatch_attention_fn(q.float(), k.float(), v.float(), scale=scale, backend="native")
        compare(out.float(), nat, ref, f"{what} call {i} q {tuple(q.shape)} k {tuple(k.shape)}")


@pytest.mark.parametrize("name", MODELS)
def test_model_world1(name, monkeypatch):
    record = []
    real = xattn.flash_attn_fwd

    def recording(q, k, v, softmax_scale=None, **kw):
        out = real(q, k, v, softmax_scale=softmax_scale, **kw)
        record.append((q.clone(), k.clone(), v.clone(), softmax_scale, out.clone()))
        return out

    monkeypatch.setattr(xattn, "flash_attn_fwd", recording)
    model, inputs, calls = MODELS[name]()
    m16, i16, m32, i32 = prepared(model, inputs, DEV)
    m32.set_attention_backend("native")
    ref = forward(m32, i32)
    m16.set_attention_backend("native")
    nat = forward(m16, i16)
    xd.enable(m16)                                   # == register() + m16.set_attention_backend("xstage")
    xd.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error", xd.XstageFallbackWarning)   # any fallback fails the test
        x = forward(m16, i16)
    s = xd.stats()
    print(name, s)
    assert s["flash"] == calls["self"] + calls["cross"] and s["native"] == 0 and s["ulysses"] == 0, s
    compare(x, nat, ref, name)
    assert len(record) == s["flash"]
    _per_call_check(record, name)
    m16.set_attention_backend("native")


SHAPES = [((2, 300, 4, 64), 300), ((1, 1000, 3, 128), 1000), ((2, 513, 8, 128), 77), ((1, 128, 2, 64), 4096)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,skv", SHAPES)
def test_dispatch_direct(shape, skv, dtype):
    xd.register()
    g = torch.Generator(device=DEV).manual_seed(7)
    b, sq, h, d = shape
    q = torch.randn(shape, device=DEV, dtype=dtype, generator=g)
    k = torch.randn((b, skv, h, d), device=DEV, dtype=dtype, generator=g)
    v = torch.randn((b, skv, h, d), device=DEV, dtype=dtype, generator=g)
    for scale in (None, 0.3 / d ** 0.5):
        xd.reset_stats()
        x = dispatch_attention_fn(q, k, v, scale=scale, backend="xstage").float()
        assert xd.stats()["flash"] == 1 and xd.stats()["native"] == 0
        nat = dispatch_attention_fn(q, k, v, scale=scale, backend="native").float()
        ref = dispatch_attention_fn(q.float(), k.float(), v.float(), scale=scale, backend="native")
        compare(x, nat, ref, f"dispatch {shape} kv {skv} {dtype} scale {scale}")


@pytest.mark.parametrize("case,reason", [("mask", "mask"), ("causal", "causal"), ("fp32", "dtype"),
                                         ("d96", "head_dim"), ("grad", "autograd"), ("gqa", "gqa")])
def test_fallbacks(case, reason):
    xd.register()
    dtype = torch.float32 if case == "fp32" else torch.bfloat16
    d = 96 if case == "d96" else 64
    q = torch.randn(1, 200, 4, d, device=DEV, dtype=dtype, requires_grad=case == "grad")
    kv = torch.randn(1, 200, 2 if case == "gqa" else 4, d, device=DEV, dtype=dtype)
    kw = dict(attn_mask=torch.rand(1, 1, 200, 200, device=DEV) > 0.3 if case == "mask" else None,
              is_causal=case == "causal", enable_gqa=case == "gqa")
    with pytest.warns(xd.XstageFallbackWarning, match=reason):
        x = dispatch_attention_fn(q, kv, kv, backend="xstage", **kw)
    n = dispatch_attention_fn(q, kv, kv, backend="native", **kw)
    assert torch.equal(x, n)
    assert xd.stats()["fallbacks"] == {reason: 1} and xd.stats()["flash"] == 0


def test_ulysses_path_one_rank(tmp_path):
    """The context-parallel path (team from a process group, ulysses_attention) on a group of one rank:
    diffusers needs a degree > 1 for its own Ulysses, so the parallel config is a stand-in with its fields."""
    import xstage.ulysses  # noqa: F401  (in-tree: an import error is a failure, not a skip)
    import torch.distributed as dist
    own = not dist.is_initialized()
    if own:
        dist.init_process_group("nccl", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1,
                                device_id=torch.device(DEV, torch.cuda.current_device()))
    try:
        group = dist.group.WORLD
        cp = SimpleNamespace(ulysses_degree=1, ring_degree=1, ulysses_anything=False, ring_anything=False,
                             _ulysses_mesh=SimpleNamespace(get_group=lambda: group))
        pc = SimpleNamespace(context_parallel_config=cp)
        xd.register()
        g = torch.Generator(device=DEV).manual_seed(11)
        for shape in ((1, 1000, 4, 128), (2, 333, 8, 64), (1, 1000, 4, 128)):
            q, k, v = (torch.randn(shape, device=DEV, dtype=torch.bfloat16, generator=g) for _ in range(3))
            xd.reset_stats()
            x = dispatch_attention_fn(q, k, v, backend="xstage", parallel_config=pc).float().clone()
            assert xd.stats()["ulysses"] == 1 and xd.stats()["native"] == 0, xd.stats()
            nat = dispatch_attention_fn(q, k, v, backend="native").float()
            ref = dispatch_attention_fn(q.float(), k.float(), v.float(), backend="native")
            compare(x, nat, ref, f"ulysses P=1 {shape}")
        assert len(xd._teams) == 1      # built once, reused across shapes
    finally:
        xd.close_teams()
        if own:
            dist.destroy_process_group()


def test_two_ranks_torchrun():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, {torch.cuda.device_count()} present")
    import xstage.ulysses  # noqa: F401  (in-tree: an import error is a failure, not a skip)
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
               PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1] / "python"), str(HERE), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(HERE / "dist_ulysses_check.py")]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
    print(r.stdout[-6000:])
    print(r.stderr[-6000:], file=sys.stderr)
    assert r.returncode == 0, f"torchrun exited {r.returncode}"
    assert "PASS all" in r.stdout
