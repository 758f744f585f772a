"""GPU tests of xstage.attention.flash_attn_fwd on torch tensors (skipped without torch or an sm_90 GPU).

Reference in float64 from the same low-precision inputs; tolerance by FlashAttention-3's rule:
max|out - ref| <= 2 * max|lowprec - ref| + atol, lowprec = the same computation with P rounded to the
input dtype and the output rounded to it (as the kernel does); atol = one ulp of the dtype at 0.25..0.5.
"""
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from torch_sm90 import torch  # noqa: E402  (skips the module without torch or an sm_90 GPU)

from xstage.attention import XstageError, flash_attn_fwd  # noqa: E402

ATOL = {torch.bfloat16: 2.0 ** -9, torch.float16: 2.0 ** -12}


def randn(*shape, dtype, gen, amp=1.0):
    return (torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32) * amp).to(dtype)


def reference(q, k, v, scale, causal):
    """(out_ref float64, out_lowprec float64, lse float64) for (batch, seq, heads, dim) inputs."""
    qd, kd, vd = q.double(), k.double(), v.double()
    s = torch.einsum("bqhd,bkhd->bhqk", qd, kd) * scale
    sq, skv = q.shape[1], k.shape[1]
    if causal:  # bottom-right aligned: query i sees keys j <= i + skv - sq
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(skv, device=q.device)[None, :]
        s = s.masked_fill(j > i + skv - sq, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)  # noqa: E741
    out = torch.einsum("bhqk,bkhd->bqhd", p / l, vd)
    p_lp = p.float().to(q.dtype).double()
    out_lp = (torch.einsum("bhqk,bkhd->bqhd", p_lp, vd) / l.transpose(1, 2)).float().to(q.dtype).double()
    lse = (m + torch.log(l)).squeeze(-1)
    return out, out_lp, lse


def assert_close(out, q, k, v, scale, causal, lse=None):
    ref, lowp, lse_ref = reference(q, k, v, scale, causal)
    assert torch.isfinite(out).all(), "output has NaN/inf (unwritten poison?)"
    err = (out.double() - ref).abs().max().item()
    tol = 2 * (lowp - ref).abs().max().item() + ATOL[q.dtype]
    assert err <= tol, f"max|out-ref| = {err:.3g} > 2*max|lowprec-ref| + atol = {tol:.3g}"
    if lse is not None:
        assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32
        lerr = (lse.double() - lse_ref).abs()
        assert (lerr <= 1e-3 + 1e-4 * lse_ref.abs()).all(), f"max|lse-ref| = {lerr.max().item():.3g}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("batch,sq,skv,heads", [(1, 1, 1, 1), (2, 127, 513, 3), (1, 1024, 1024, 12), (1, 300, 77, 40)])
def test_matches_reference(dtype, dim, batch, sq, skv, heads):
    gen = torch.Generator(device="cuda").manual_seed(1000 * sq + skv + dim)
    q = randn(batch, sq, heads, dim, dtype=dtype, gen=gen)
    k = randn(batch, skv, heads, dim, dtype=dtype, gen=gen)
    v = randn(batch, skv, heads, dim, dtype=dtype, gen=gen)
    out = torch.full_like(q, float("nan"))
    res = flash_attn_fwd(q, k, v, out=out)
    torch.cuda.synchronize()
    assert res is out
    assert_close(out, q, k, v, 1 / math.sqrt(dim), False)


def test_lse_scale_and_strided_views():
    """(batch, heads, seq, dim) storage passed as transposed views; a packed qkv tensor; custom scale."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    b, s, h, d = 2, 333, 5, 128
    qkv = randn(b, s, 3, h, d, dtype=torch.bfloat16, gen=gen)
    q, k, v = qkv.unbind(dim=2)  # strided views, no copies
    out, lse = flash_attn_fwd(q, k, v, softmax_scale=0.3, return_lse=True)
    torch.cuda.synchronize()
    assert_close(out, q, k, v, 0.3, False, lse)
    qt = randn(b, h, s, d, dtype=torch.bfloat16, gen=gen, amp=3.0).transpose(1, 2)
    kt = randn(b, h, 700, d, dtype=torch.bfloat16, gen=gen).transpose(1, 2)
    vt = randn(b, h, 700, d, dtype=torch.bfloat16, gen=gen).transpose(1, 2)
    out_t = torch.empty(b, h, s, d, dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    out2, lse2 = flash_attn_fwd(qt, kt, vt, return_lse=True, out=out_t)
    torch.cuda.synchronize()
    assert out2 is out_t
    assert_close(out2, qt, kt, vt, 1 / math.sqrt(d), False, lse2)


def test_side_stream():
    gen = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = (randn(1, 2048, 8, 128, dtype=torch.float16, gen=gen) for _ in range(3))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = flash_attn_fwd(q, k, v)
    side.synchronize()
    assert_close(out, q, k, v, 1 / math.sqrt(128), False)


def test_causal():
    gen = torch.Generator(device="cuda").manual_seed(5)
    for sq, skv in ((300, 300), (127, 1000)):
        q = randn(2, sq, 3, 64, dtype=torch.bfloat16, gen=gen)
        k = randn(2, skv, 3, 64, dtype=torch.bfloat16, gen=gen)
        v = randn(2, skv, 3, 64, dtype=torch.bfloat16, gen=gen)
        out, lse = flash_attn_fwd(q, k, v, causal=True, return_lse=True)  # causal is supported: a refusal fails
        torch.cuda.synchronize()
        assert_close(out, q, k, v, 1 / 8, True, lse)


def test_errors():
    gen = torch.Generator(device="cuda").manual_seed(3)
    q = randn(1, 64, 2, 128, dtype=torch.bfloat16, gen=gen)
    with pytest.raises(ValueError, match="CUDA tensor"):
        flash_attn_fwd(q.cpu(), q, q)
    with pytest.raises(ValueError, match="float32"):
        flash_attn_fwd(q.float(), q.float(), q.float())
    with pytest.raises(ValueError, match="head_dim = 96"):
        x = randn(1, 64, 2, 96, dtype=torch.bfloat16, gen=gen)
        flash_attn_fwd(x, x, x)
    with pytest.raises(ValueError, match="k.dtype"):
        flash_attn_fwd(q, q.half(), q)
    with pytest.raises(ValueError, match="stride 1"):
        x = randn(1, 64, 2, 128, 2, dtype=torch.bfloat16, gen=gen)[..., 0]
        flash_attn_fwd(x, x, x)
    # A view starting 2 bytes into its storage: the library names the misaligned pointer.
    flat = randn(64 * 2 * 128 + 1, dtype=torch.bfloat16, gen=gen)
    mis = flat[1:].view(1, 64, 2, 128)
    with pytest.raises(XstageError, match="q = .* not 16-byte aligned"):
        flash_attn_fwd(mis, q, q)
    # Output aliasing an input is refused.
    k = randn(1, 64, 2, 128, dtype=torch.bfloat16, gen=gen)
    with pytest.raises(XstageError, match="o overlaps"):
        flash_attn_fwd(q, k, k, out=k)
    # The rest of _check_inputs' rules, each named (they were untested; attn_fwd_to_peers shares them now).
    with pytest.raises(ValueError, match="q must be a torch.Tensor, got list"):
        flash_attn_fwd([q], q, q)
    with pytest.raises(ValueError, match=r"k must have 4 dimensions .* got shape \(64, 2, 128\)"):
        flash_attn_fwd(q, q[0], q)
    with pytest.raises(ValueError, match=r"k.shape = \(1, 32, 2, 128\) differs from v.shape"):
        flash_attn_fwd(q, q[:, :32], q)
    with pytest.raises(ValueError, match="does not match q shape"):
        x = randn(1, 64, 1, 128, dtype=torch.bfloat16, gen=gen)
        flash_attn_fwd(q, x, x)
    with pytest.raises(ValueError, match="empty tensors"):
        flash_attn_fwd(q[:, :0], q, q)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="softmax_scale = .* must be a positive finite number"):
            flash_attn_fwd(q, q, q, softmax_scale=bad)
    with pytest.raises(ValueError, match="is 0.0 as the float32 the kernel takes"):
        flash_attn_fwd(q, q, q, softmax_scale=1e-50)
    for out in (torch.empty(1, 64, 2, 64, dtype=torch.bfloat16, device="cuda"), q.half().clone(), q.cpu()):
        with pytest.raises(ValueError, match="out must be a tensor of q's shape"):
            flash_attn_fwd(q, q, q, out=out)
