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

from xstage.attention import ERR_INVALID, ERR_UNSUPPORTED, XstageError, flash_attn_fwd, last_error  # noqa: E402
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
    with pytest.raises(ValueError, match="softmax_scale = -1.0 must be a positive finite number"):
        UlyssesAttention(team, 1, 64, 8, 128, torch.bfloat16, softmax_scale=-1.0)  # (it became 1/sqrt(d))
    with pytest.raises(ValueError, match="softmax_scale = 1e-50 must be a positive finite number"):
        UlyssesAttention(team, 1, 64, 8, 128, torch.bfloat16, softmax_scale=1e-50)  # 0 as a float32
    with pytest.raises(XstageError, match="head_dim = 96 is not supported") as e:
        UlyssesAttention(team, 1, 64, 8, 96, torch.bfloat16)
    assert e.value.code == ERR_UNSUPPORTED, "a head dim the kernel lacks is unsupported, as in flash_attn_fwd"
    with pytest.raises(ValueError, match="variant 7 is neither FUSED"):
        layer(x, x, x, variant=7)
    with pytest.raises(ValueError, match="q must be a CUDA tensor, got one on cpu"):
        layer([t.cpu() for t in x], x, x)
    # the C ABI names which array is null (it said "q/k/v arrays are null")
    import ctypes

    from xstage import ulysses as xu
    arr = (ctypes.c_void_p * 4)(*[t.data_ptr() for t in x])
    assert xu._lib().xstage_ulysses_forward(layer._h, arr, None, arr, 0, None, None) == ERR_INVALID
    assert last_error() == "the k array is null"


def test_layer_cache_goes_with_its_team():
    """ulysses_attention's cached layers live on their team: a new team (even one at a recycled id()) makes its own,
    and closing a team closes its layers first, which then refuse calls."""
    x = [torch.randn(1, 64, 8, 64, device="cuda").to(torch.bfloat16) for _ in range(2)]
    team = Team.emulated(2)
    ulysses_attention(x, x, x, team)
    (layer,) = team._ulysses_layers.values()
    team.close()
    assert not layer._h.value, "the cached layer was not closed with its team"
    with pytest.raises(XstageError, match="layer is null"):
        layer(x, x, x)
    other = Team.emulated(2)
    got = ulysses_attention(x, x, x, other)
    other.check("a new team's own layer")
    assert other._ulysses_layers and next(iter(other._ulysses_layers.values())) is not layer
    assert all(torch.isfinite(g.float()).all() for g in got)


def test_torch_baseline_emulated_check(tmp_path):
    """bench/ulysses/torch_baseline.py --emulate runs its checks end to end on one GPU: xstage's layer on emulated
    ranks against the torch layer (cuDNN SDPA per rank's heads) and both against the float64 reference."""
    import json
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "ulysses"))
    import torch_baseline
    rc = torch_baseline.main(["--emulate", "2", "--seq", "1K,3K", "--heads-per-rank", "2,3", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "torch_baseline.json").read_text())
    assert rc == 0 and data["all_checks_ok"] and len(data["rows"]) == 4, data
    assert data["command"].startswith("python3 bench/ulysses/torch_baseline.py --emulate 2")
    for r in data["rows"]:
        assert r["ranks"] == 2 and r["worst_err_over_tol"] <= 1, r
        # both bf16 layers within a few bf16 steps of float64; xstage no worse than a small multiple of torch's error
        assert 0 < r["torch_err_vs_f64"] < 2 ** -7, r
        assert 0 < r["xstage_err_vs_f64"] <= 4 * r["torch_err_vs_f64"] + 2 ** -12, r
    with pytest.raises(SystemExit, match="3001 is not divisible by the world size 2"):
        torch_baseline.main(["--emulate", "2", "--seq", "3001", "--heads-per-rank", "2"])


def test_torch_baseline_one_real_rank(tmp_path):
    """The baseline's real-rank path end to end under torchrun with one process (P = 1: nothing moves between GPUs;
    a run of the program, its times are not asserted): both layers checked and timed, the spreads and the ABBA flip
    recorded."""
    import json
    import subprocess
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
           str(root / "bench" / "ulysses" / "torch_baseline.py"), "--seq", "2K", "--heads-per-rank", "2",
           "--block-s", "0.02", "--rounds", "1", "--warmup-calls", "2", "--out", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((tmp_path / "torch_baseline.json").read_text())
    assert data["all_checks_ok"] and data["timed"] and data["ranks"] == 1 and len(data["rows"]) == 1, data
    row = data["rows"][0]
    assert row["torch_us"] > 0 and row["xstage_us"] > 0 and row["torch_spread"] >= 0 and row["xstage_spread"] >= 0
    assert isinstance(row["ratio_flips"], bool) and 0 < row["xstage_err_vs_f64"] <= 4 * row["torch_err_vs_f64"] + 2 ** -12
