"""GPU tests of xstage.moe on torch tensors (skipped without torch or an sm_90 GPU): the fused MoE layer through the
C ABI against moe_reference in float64, with tolerances tied to the reference's own error (the C++ tests' rule:
rms(out - ref) <= 0.25 rms(ref - exact), max|out - ref| <= 2 max|ref - exact| + 1e-3 max|exact|); outputs poisoned
with NaN; emulated P = 2, 4 bit-identical to P = 1, both tile orders and both dispatch plans (device, host)
bit-identical; ordered on torch's stream; a real team of one process; argument errors named, and a device plan's bad
routing raised by check() with nothing written on that rank."""
import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from torch_sm90 import torch  # noqa: E402  (skips the module without torch or an sm_90 GPU)

from xstage.attention import XstageError  # noqa: E402
from xstage.moe import ORDERS, MoeLayer, moe_reference, quantize_act, quantize_weights  # noqa: E402
from xstage.team import Team  # noqa: E402

xmoe_orders = tuple(ORDERS)  # expert-wave, interleaved, expert-wave-lagged, l1-first

sys.path.insert(0, str(Path(__file__).resolve().parent))
from moe_cases import make_inputs  # noqa: E402

SEED = int(os.environ.get("XSTAGE_TEST_SEED", "20261204"))


def check_close(out, ref, exact, what):
    assert not torch.isnan(out).any(), f"{what}: NaN in the output (an untouched entry or a bad scale)"
    own = (ref - exact)
    err = (out.double() - ref)
    rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
    assert rms(own) > 0, f"{what}: the reference has no rounding of its own to tie the tolerance to"
    assert rms(err) <= 0.25 * rms(own), f"{what}: rms error {rms(err):.3e} > 0.25 x the reference's own {rms(own):.3e}"
    bound = 2 * own.abs().max().item() + 1e-3 * exact.abs().max().item()
    assert err.abs().max().item() <= bound, f"{what}: max error {err.abs().max().item():.3e} > {bound:.3e}"


def run_split(team, layer, x, idx, wt, w, order="interleaved", plan="device"):
    """The global batch split into the team's ranks (rank-major), outputs poisoned with NaN; the gathered result."""
    P, T = team.world, layer.tokens
    sl = lambda t: [t[r * T:(r + 1) * T].contiguous() for r in range(P)]  # noqa: E731
    outs = [torch.full((T, layer.hidden), float("nan"), device="cuda") for _ in range(P)]
    args = (sl(x), sl(idx), sl(wt)) if P > 1 else (x, idx, wt)
    got = layer(*args, w, order=order, out=outs if P > 1 else outs[0], plan=plan)
    layer.check()
    return torch.cat(got) if P > 1 else got


@pytest.mark.parametrize("fmt", ["w8a8", "w4a8", "bf16"])
@pytest.mark.parametrize("skewed", [False, True])
def test_single_rank_matches_reference(fmt, skewed):
    H, I, E, k, T = 256, 384, 8, 2, 300
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 7 * skewed + {"w8a8": 0, "w4a8": 1, "bf16": 2}[fmt],
                                     skewed)
    w = quantize_weights(w1, w2, fmt, keep_reference=True)
    team = Team.emulated(1)
    layer = MoeLayer(team, H, I, E, k, T, fmt)
    out = run_split(team, layer, x, idx, wt, w)
    check_close(out, moe_reference(x, idx, wt, w), moe_reference(x, idx, wt, w, exact=True), f"{fmt} P=1")


@pytest.mark.parametrize("fmt", ["w8a8", "w4a8"])
def test_emulated_ranks_and_orders_bit_identical(fmt):
    """The same global batch at P = 1, 2, 4 (emulated), in both tile orders and with both plans: the same bits
    everywhere."""
    H, I, E, k, T = 512, 256, 16, 4, 256
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 11, skewed=True)
    w = quantize_weights(w1, w2, fmt, keep_reference=True)
    base = None
    for P in (1, 2, 4):
        team = Team.emulated(P)
        layer = MoeLayer(team, H, I, E, k, T // P, fmt)
        for order in ("interleaved", "expert-wave", "expert-wave-lagged"):
            for plan in ("device", "host"):
                out = run_split(team, layer, x, idx, wt, w, order, plan)
                if base is None:
                    base = out
                    check_close(out, moe_reference(x, idx, wt, w), moe_reference(x, idx, wt, w, exact=True), fmt)
                assert torch.equal(out.view(torch.int32), base.view(torch.int32)), \
                    f"{fmt} P={P} {order} {plan} plan != P=1"


def test_float8_inputs_as_given():
    """x already quantized (codes + 1x128 scales) gives the bits of x quantized by the layer."""
    H, I, E, k, T = 256, 256, 4, 2, 64
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 3)
    w = quantize_weights(w1, w2, "w8a8")
    layer = MoeLayer(Team.emulated(1), H, I, E, k, T)
    a = layer(x, idx, wt, w).clone()
    codes, scales = quantize_act(x)
    poisoned = torch.full((T, H), float("nan"), device="cuda")  # not the block a freed output left: must be written
    b = layer(codes, idx, wt, w, x_scale=scales, out=poisoned)
    layer.check()
    assert b.data_ptr() == poisoned.data_ptr()
    assert not torch.isnan(b).any(), "the second call left rows unwritten"
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


@pytest.mark.parametrize("side_stream", [False, True])
def test_layer_is_ordered_on_torchs_stream(side_stream):
    """Inputs written on torch's current stream after a long sleep are the ones the layer reads, and a clone right
    after the call copies its finished output."""
    H, I, E, k, T, P = 256, 256, 8, 2, 128, 2
    x, w1, w2, idx, wt = make_inputs(P * T, H, I, E, k, SEED + 5)
    w = quantize_weights(w1, w2, "w8a8", keep_reference=True)
    team = Team.emulated(P)
    layer = MoeLayer(team, H, I, E, k, T)
    xs = [torch.full((T, H), float("nan"), device="cuda") for _ in range(P)]
    torch.cuda.synchronize()
    stream = torch.cuda.Stream() if side_stream else torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(100_000_000)  # ~50 ms: work not ordered after it would read the NaNs
        for r in range(P):
            xs[r].copy_(x[r * T:(r + 1) * T])
        out = torch.cat([o.clone() for o in layer(xs, [idx[r * T:(r + 1) * T] for r in range(P)],
                                                  [wt[r * T:(r + 1) * T] for r in range(P)], w)])
        layer.check()
    torch.cuda.synchronize()
    check_close(out, moe_reference(x, idx, wt, w), moe_reference(x, idx, wt, w, exact=True), "side stream")


def test_real_team_of_one():
    import torch.distributed as dist
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            team = Team.from_process_group()
            H, I, E, k, T = 256, 256, 8, 2, 200
            x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 9)
            w = quantize_weights(w1, w2, "w8a8", keep_reference=True)
            out = MoeLayer(team, H, I, E, k, T)(x, idx, wt, w)
            torch.cuda.synchronize()
            check_close(out, moe_reference(x, idx, wt, w), moe_reference(x, idx, wt, w, exact=True), "real P=1")
        finally:
            dist.destroy_process_group()


def test_bad_input_is_named():
    H, I, E, k, T = 256, 256, 8, 2, 64
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 13)
    w = quantize_weights(w1, w2, "w8a8")
    team = Team.emulated(2)
    with pytest.raises(XstageError, match="experts = 6 must be a positive multiple of the world size 4"):
        MoeLayer(Team.emulated(4), H, I, 6, k, T)
    with pytest.raises(XstageError, match="hidden = 200"):
        MoeLayer(team, 200, I, E, k, T)
    with pytest.raises(ValueError, match="format"):
        MoeLayer(team, H, I, E, k, T, "fp4")
    one = MoeLayer(Team.emulated(1), H, I, E, k, T)
    out = torch.full((T, H), 7.0, device="cuda")
    bad = idx.clone()
    bad[5, 1] = E + 3
    dup = idx.clone()
    dup[9, 1] = dup[9, 0]
    # the host plan raises at the call, before anything is enqueued
    with pytest.raises(XstageError, match=rf"token 5, slot 1: expert {E + 3} is out of range"):
        one(x, bad, wt, w, out=out, plan="host")
    with pytest.raises(XstageError, match="token 9, slot 1: expert .* repeats slot 0"):
        one(x, dup, wt, w, out=out, plan="host")
    # the device plan finds it on the GPU: check() raises it, and the rank's out is not written
    one(x, bad, wt, w, out=out)
    with pytest.raises(XstageError, match=rf"rank 0, token 5, slot 1: expert {E + 3} is out of range"):
        one.check()
    one(x, dup, wt, w, out=out)
    with pytest.raises(XstageError, match="rank 0, token 9, slot 1: expert .* repeats slot 0"):
        one.check()
    torch.cuda.synchronize()
    assert torch.all(out == 7.0), "a rejected call wrote its output"
    one.check()  # reported once: the layer is clean again
    with pytest.raises(ValueError, match="plan"):
        one(x, idx, wt, w, plan="gpu")
    with pytest.raises(ValueError, match=r"\[n, 256\] with n <= 64"):
        one(torch.cat([x, x[:1]]), idx, wt, w)  # 65 tokens on a layer of 64
    with pytest.raises(ValueError, match=r"topk_idx and topk_weight must be \[10, 2\]"):
        one(x[:10], idx, wt, w)
    with pytest.raises(ValueError, match="format 'w8a8'"):
        one(x, idx, wt, quantize_weights(w1, w2, "bf16"))
    with pytest.raises(ValueError, match="2 ranks"):
        MoeLayer(team, H, I, E, k, T)(x, idx, wt, w)
    with pytest.raises(ValueError, match="order"):
        one(x, idx, wt, w, order="random")
    # what reached the kernel unchecked: a CPU x_scale or out (host pointers), bool ids, int64 ids past int32
    xq, xs = quantize_act(x)
    with pytest.raises(ValueError, match=r"float8 x needs x_scale float32 \[64, 2\] on cuda:0, got torch.float32 "
                                         r"\(64, 2\) on cpu"):
        one(xq, idx, wt, w, x_scale=xs.cpu())
    with pytest.raises(ValueError, match=r"out must be contiguous float32 tensors \[64, 256\] on cuda:0, got .* on cpu"):
        one(x, idx, wt, w, out=torch.empty(T, H))
    with pytest.raises(ValueError, match="topk_idx must be an integer tensor, got torch.bool"):
        one(x, idx > 0, wt, w)
    wide = idx.to(torch.int64)
    wide[5, 1] = 2 ** 32 + int(idx[5, 0] + 1) % E  # wrapped to a valid expert before
    for plan in ("host", "device"):
        out.fill_(7.0)
        if plan == "host":
            with pytest.raises(XstageError, match="token 5, slot 1: expert -1 is out of range"):
                one(x, wide, wt, w, out=out, plan=plan)
        else:
            one(x, wide, wt, w, out=out, plan=plan)
            with pytest.raises(XstageError, match="token 5, slot 1: expert -1 is out of range"):
                one.check()
        torch.cuda.synchronize()
        assert torch.all(out == 7.0), f"{plan}: a refused call wrote its output"


def test_quantization_errors_are_named():
    """quantize_weights' and quantize_act's argument errors (untested until session 80's audit), and a float topk_idx."""
    H, I, E, k, T = 256, 256, 8, 2, 16
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 23)
    with pytest.raises(ValueError, match=r"w1 and w2 must be \[experts, 2I, H\] and \[experts, H, I\], got \(512, 256\)"):
        quantize_weights(w1[0], w2)
    with pytest.raises(ValueError, match=r"w1 \(8, 512, 256\) and w2 \(8, 128, 256\) disagree"):
        quantize_weights(w1, w2[:, :128])
    with pytest.raises(ValueError, match="hidden 200 and inter 256 must be multiples of 128"):
        quantize_weights(w1[..., :200], w2[:, :200])
    with pytest.raises(ValueError, match="w1 and w2 must be CUDA tensors"):
        quantize_weights(w1.cpu(), w2.cpu())
    with pytest.raises(ValueError, match="format 'fp4' is none of"):
        quantize_weights(w1, w2, "fp4")
    with pytest.raises(ValueError, match=r"x must be \[T, H\] with H a multiple of 128, got \(16, 200\)"):
        quantize_act(x[:, :200])
    layer = MoeLayer(Team.emulated(1), H, I, E, k, T)
    with pytest.raises(ValueError, match="topk_idx must be an integer tensor, got torch.float32"):
        layer(x, idx.float(), wt, quantize_weights(w1, w2, "w8a8"))


def test_reference_checks_the_routing():
    """moe_reference refuses what the layer refuses (it skipped an out-of-range id and counted a repeated one twice,
    so a test against it could pass a wrong layer), and float8 x without its scale is named."""
    H, I, E, k, T = 256, 256, 8, 2, 16
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 19)
    wr = quantize_weights(w1, w2, "w8a8", keep_reference=True)
    bad, dup = idx.clone(), idx.clone()
    bad[5, 1] = E + 3
    dup[9, 1] = dup[9, 0]
    with pytest.raises(ValueError, match=rf"topk_idx token 5, slot 1: expert {E + 3} is out of range \[0, {E}\)"):
        moe_reference(x, bad, wt, wr)
    with pytest.raises(ValueError, match="topk_idx token 9: an expert repeats"):
        moe_reference(x, dup, wt, wr)
    with pytest.raises(ValueError, match="float8 x needs its x_scale"):
        moe_reference(quantize_act(x)[0], idx, wt, wr)
    assert torch.isfinite(moe_reference(x, idx, wt, wr)).all()


def test_emulated_team_on_a_negative_device_and_closed_teams():
    """Team.emulated(P, device=-1) is the current device (team.h), and a layer runs on it (every call raised "the
    weights are on cuda:0, the team's ranks on cuda:-1"); closing the team closes its layers, which refuse calls."""
    H, I, E, k, T = 256, 256, 8, 2, 64
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 17)
    w = quantize_weights(w1, w2, "w8a8")
    team = Team.emulated(1, device=-1)
    layer = MoeLayer(team, H, I, E, k, T)
    ref = layer(x, idx, wt, w)
    layer.check()
    assert torch.isfinite(ref).all()
    team.close()
    assert not layer._h.value, "the layer was not closed with its team"
    with pytest.raises(XstageError, match="layer is null"):
        layer(x, idx, wt, w)


def test_fewer_tokens_than_capacity():
    """A layer of 128 tokens per rank called with fewer: emulated ranks with 100 and 0 tokens give the bits of one rank
    with those 100; rows past a rank's count stay untouched; a host plan needs equal counts (60 and 60: the device
    plan's bits) and refuses different ones."""
    H, I, E, k, T = 256, 256, 8, 2, 128
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 17, skewed=True)
    w = quantize_weights(w1, w2, "w8a8", keep_reference=True)
    two = MoeLayer(Team.emulated(2), H, I, E, k, T)
    n = 100
    one = MoeLayer(Team.emulated(1), H, I, E, k, n)
    want = one(x[:n], idx[:n], wt[:n], w)
    one.check()
    check_close(want, moe_reference(x[:n], idx[:n], wt[:n], w), moe_reference(x[:n], idx[:n], wt[:n], w, exact=True),
                "100 tokens")
    outs = [torch.full((T, H), 7.0, device="cuda") for _ in range(2)]
    got = two([x[:n], x[:0]], [idx[:n], idx[:0]], [wt[:n], wt[:0]], w, out=[outs[0][:n], outs[1][:0]])
    two.check()
    assert got[0].shape == (n, H) and got[1].shape == (0, H)
    assert torch.equal(outs[0][:n].view(torch.int32), want.view(torch.int32)), "100 tokens on rank 0 != one rank's"
    assert torch.all(outs[0][n:] == 7.0) and torch.all(outs[1] == 7.0), "rows past a rank's tokens were written"
    m = 60
    halves = ([x[:m], x[m:2 * m]], [idx[:m], idx[m:2 * m]], [wt[:m], wt[m:2 * m]])
    dev = torch.cat(two(*halves, w)).clone()
    poisoned = [torch.full((m, H), float("nan"), device="cuda") for _ in range(2)]  # the host-plan call must write them
    host = torch.cat(two(*halves, w, plan="host", out=poisoned))
    two.check()
    assert not torch.isnan(host).any(), "the host-plan call left rows unwritten"
    assert torch.equal(dev.view(torch.int32), host.view(torch.int32)), "host plan != device plan at 60 tokens"
    with pytest.raises(ValueError, match=r"plan='host' needs the same token count on every rank, got \[60, 59\]"):
        two([x[:m], x[:m - 1]], [idx[:m], idx[:m - 1]], [wt[:m], wt[:m - 1]], w, plan="host")


def test_random_valid_shapes():
    """Shapes drawn from everything MoeLayer accepts (hidden and inter any multiple of 128, experts any multiple of the
    world, top-k in [1, min(experts, 12)]), every format, P = 1, 2, 4, 8 emulated, each rank called with its own count of
    tokens up to the capacity (some 0): every rank's rows against the float64 reference of its own tokens, rows past a
    rank's count untouched. The draw is fixed by XSTAGE_TEST_SEED; each case names itself on failure."""
    import random
    rng = random.Random(SEED + 53)
    for case in range(12):
        P = rng.choice((1, 2, 4, 8))
        H, I = 128 * rng.randint(1, 10), 128 * rng.randint(1, 8)
        E = P * rng.randint(1, max(1, 32 // P))
        k = rng.randint(1, min(E, 12))
        T = rng.randint(1, 96)
        fmt = rng.choice(("w8a8", "w4a8", "bf16"))
        counts = [rng.choice((0, T, rng.randint(1, T))) for _ in range(P)]
        what = f"case {case}: P={P} H={H} I={I} E={E} k={k} T={T} {fmt} tokens {counts}"
        n = sum(counts)
        x, w1, w2, idx, wt = make_inputs(max(n, 1), H, I, E, k, SEED + 101 * case, skewed=case % 2 == 1)
        w = quantize_weights(w1, w2, fmt, keep_reference=True)
        layer = MoeLayer(Team.emulated(P), H, I, E, k, T, fmt)
        starts = [sum(counts[:r]) for r in range(P)]
        sl = lambda t: [t[a:a + c].contiguous() for a, c in zip(starts, counts)]  # noqa: E731
        outs = [torch.full((T, H), 7.0, device="cuda") for _ in range(P)]
        got = layer(*((sl(x), sl(idx), sl(wt)) if P > 1 else (x[:n], idx[:n], wt[:n])), w,
                    out=[o[:c] for o, c in zip(outs, counts)] if P > 1 else outs[0][:n])
        layer.check()
        got = got if P > 1 else [got]
        for r in range(P):
            assert got[r].shape == (counts[r], H), f"{what}: rank {r} returned {tuple(got[r].shape)}"
            assert torch.all(outs[r][counts[r]:] == 7.0), f"{what}: rank {r} wrote rows past its {counts[r]} tokens"
        if n > 0:
            out = torch.cat([g for g in got if g.shape[0] > 0])
            check_close(out, moe_reference(x[:n], idx[:n], wt[:n], w),
                        moe_reference(x[:n], idx[:n], wt[:n], w, exact=True), what)


def test_captured_in_a_cuda_graph():
    """A call captured once in torch.cuda.graph, replayed on new activations and routings copied into the captured
    tensors: each replay bit-identical to an eager call on the same inputs; plan='host' refuses to be captured."""
    H, I, E, k, T = 256, 256, 8, 2, 128
    x, w1, w2, idx, wt = make_inputs(T, H, I, E, k, SEED + 17, skewed=True)
    w = quantize_weights(w1, w2, "w8a8", keep_reference=True)
    layer = MoeLayer(Team.emulated(1), H, I, E, k, T)
    sx, sidx, swt = x.clone(), idx.clone(), wt.clone()
    out = torch.empty(T, H, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch asks before a capture
        layer(sx, sidx, swt, w, out=out)
        layer.check()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(sx, sidx, swt, w, out=out)
    for i in range(3):
        x2, _, _, idx2, wt2 = make_inputs(T, H, I, E, k, SEED + 100 + i, skewed=i % 2 == 0)
        sx.copy_(x2)
        sidx.copy_(idx2)
        swt.copy_(wt2)
        out.fill_(float("nan"))
        graph.replay()
        got = out.clone()
        want = layer(x2, idx2, wt2, w)
        layer.check()
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), f"replay {i} differs from an eager call"
        check_close(got, moe_reference(x2, idx2, wt2, w), moe_reference(x2, idx2, wt2, w, exact=True), f"replay {i}")
    with pytest.raises(ValueError, match="plan='host'"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            layer(sx, sidx, swt, w, out=out, plan="host")


def test_two_ranks_torchrun():
    """Two real ranks (torchrun, NCCL, one GPU each): every rank's output bit-identical to its slice of a one-GPU run of
    the global batch, and within tolerance of the float64 reference (moe_two_ranks.py)."""
    import subprocess
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, {torch.cuda.device_count()} present")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    # torchrun's module form: this interpreter's torch, whether or not a torchrun script is on PATH
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           str(Path(__file__).resolve().parent / "moe_two_ranks.py")]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    print(r.stdout[-4000:])
    print(r.stderr[-4000:], file=sys.stderr)
    assert r.returncode == 0, f"torchrun exited {r.returncode}"
    assert "PASS all" in r.stdout


@pytest.mark.parametrize("world", [1, 2])
def test_auto_order(world):
    """The model's order (at P = 1 the simulator's, at P = 2 the design test's): one of the three, with a lead and a
    reason; order="auto" runs it and gives that order's bits; an unknown platform is named."""
    H, I, E, k, T = 512, 256, 16, 4, 128
    x, w1, w2, idx, wt = make_inputs(world * T, H, I, E, k, SEED + 21)
    w = quantize_weights(w1, w2, "w8a8")
    team = Team.emulated(world)
    layer = MoeLayer(team, H, I, E, k, T)
    order, lead, reason = layer.auto_order()
    assert order in xmoe_orders and lead >= 1 and order in reason, (order, lead, reason)
    assert layer.auto_order(skewed=True)[0] in xmoe_orders
    a = run_split(team, layer, x, idx, wt, w, "auto")
    b = run_split(team, layer, x, idx, wt, w, order)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    with pytest.raises(XstageError, match="no-such-platform"):
        layer.auto_order(platform="no-such-platform")
    # For a call's own token count: the capacity's answer by default; a count out of range named (Python and C ABI).
    assert layer.auto_order(tokens=T) == (order, lead, reason)
    assert layer.auto_order(tokens=1)[0] in xmoe_orders
    for bad in (0, T + 1):
        with pytest.raises(ValueError, match=rf"tokens {bad} must be in \[1, {T}\]"):
            layer.auto_order(tokens=bad)
    import ctypes
    from xstage import moe as xmoe, team as xteam
    o, d = ctypes.c_int(), ctypes.c_int()
    with pytest.raises(XstageError, match=rf"tokens = {T + 1} must be in \[0, {T}\]"):
        xteam._ok(xmoe._lib().xstage_moe_auto_order(layer._h, T + 1, 0, None, ctypes.byref(o), ctypes.byref(d), None, 0))


def test_auto_order_for_fewer_tokens():
    """DiT-MoE-XL's dimensions with a capacity of 8192 tokens: 8 rows per expert there, 1 at 1024 tokens, and the
    model's reason says so for each count (at P = 1 the simulator runs the call's rows, not the capacity's)."""
    layer = MoeLayer(Team.emulated(1), 1152, 4608, 16, 2, 8192)
    full, small = layer.auto_order(), layer.auto_order(tokens=1024)
    assert "8 rows per expert" in full[2] and "1 rows per expert" in small[2], (full, small)
    assert full == layer.auto_order(tokens=8192)
    # At 8192 tokens the simulator puts every Linear-1 tile first ahead of both plain orders (measured 0.76-0.84x plain
    # Expert-Wave's time and 0.86-0.98x the lagged waves' on the H200, s60; docs/SCHEDULERS.md).
    assert full[0] == "l1-first", full
