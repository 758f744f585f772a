"""The fused expert-parallel MoE layer (xstage's sm_90a mega-kernel: dispatch -> Linear-1 -> SwiGLU -> Linear-2 ->
combine by remote stores -> top-k weighted sum) on torch tensors, through the C ABI of libxstage_attention.so
(include/xstage/moe.h; docs/MOE.md has the kernel).

    from xstage.team import Team
    from xstage.moe import MoeLayer, quantize_weights
    team = Team.from_process_group()                     # torchrun: one process per GPU (or Team.emulated(P))
    w = quantize_weights(w1, w2, "w8a8")                 # this rank's experts: w1 [E/P, 2I, H], w2 [E/P, H, I]
    layer = MoeLayer(team, hidden=H, inter=I, experts=E, topk=k, tokens_per_rank=T)
    out = layer(x, topk_idx, topk_weight, w)             # x [T, H] bf16 (quantized here) -> out [T, H] fp32

Experts are partitioned over the ranks: rank r holds global experts [r E/P, (r + 1) E/P). w1 holds each expert's gate
rows [0, I) then its up rows [I, 2I); the expert computes (silu(x w_gate^T) * (x w_up^T)) w2^T. Formats: "w8a8" (FP8
e4m3 activations with 1x128 scales, weights with 128x128 block scales), "w4a8" (int4 weights with one scale per row and
128-group, expanded to FP8 in the kernel) and "bf16" (reference runs, no quantization). tokens_per_rank is a
capacity: each call passes up to that many tokens per rank (a rank may pass none).

The routing stays on the GPU (plan="device", the default): the kernel's dispatch plan is made there from each rank's
topk_idx and the ranks exchange their counts by peer stores, so a call never waits for the GPU; an invalid index is
raised by check(). plan="host" builds it on the host instead (each call copies topk_idx there; a real team all-gathers
it over its process group first) and raises a bad index at the call. Same bits either way. With an emulated team (Team.emulated(P)), x, topk_idx, topk_weight and
out are lists of the P ranks' tensors, the weights hold all E experts, and a list is returned.

`moe_reference` computes the same layer in float64 on the gathered inputs, with or without the kernel's own
quantization of h and rounding of the expert outputs; the tests compare against both.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from . import team as _team

__all__ = ["MoeLayer", "MoeWeights", "quantize_act", "quantize_weights", "moe_reference", "FORMATS", "ORDERS"]

FORMATS = {"w8a8": 0, "w4a8": 1, "bf16": 2}                # XSTAGE_MOE_W8A8 / W4A8 / BF16
ORDERS = {"expert-wave": 0, "interleaved": 1, "expert-wave-lagged": 2, "l1-first": 3}  # XSTAGE_MOE_EXPERT_WAVE / ... / _L1_FIRST
_BLOCK = 128               # 1x128 activation blocks, 128x128 weight blocks, W4A8 groups
_E4M3_MAX = 448.0
_AMAX_FLOOR = 1e-4         # xstage/moe/quant.hpp's kAmaxFloor


def _lib():
    lib = _team._lib()
    if not getattr(lib, "_xstage_moe_ready", False):
        vp, i = ctypes.c_void_p, ctypes.c_int
        pp = ctypes.POINTER(vp)
        sig = {
            "xstage_moe_create": ([vp, i, i, i, i, i, i, pp], i),
            "xstage_moe_destroy": ([vp], None),
            "xstage_moe_forward": ([vp, ctypes.POINTER(i), ctypes.POINTER(ctypes.c_int32), pp, pp, pp, pp, vp, vp, vp,
                                    vp, i, vp], i),
            "xstage_moe_forward_device": ([vp, ctypes.POINTER(i), pp, pp, pp, pp, pp, vp, vp, vp, vp, i, vp], i),
            "xstage_moe_check": ([vp, vp, ctypes.c_char_p], i),
            "xstage_moe_auto_order": ([vp, i, i, ctypes.c_char_p, ctypes.POINTER(i), ctypes.POINTER(i),
                                       ctypes.c_char_p, i], i),
            "xstage_moe_pack_int4": ([vp, vp, i, i, i, vp], i),
        }
        for name, (args, res) in sig.items():
            f = getattr(lib, name)
            f.argtypes, f.restype = args, res
        lib._xstage_moe_ready = True
    return lib


def _ids32(it):
    """Top-k indices as the int32 the library reads. A wider id outside int32 would wrap into a valid expert (2^32 + 3
    -> 3), so it becomes -1, which the plan refuses as out of range, naming its rank, token and slot."""
    import torch
    if it.dtype == torch.int32:
        return it
    if it.dtype not in (torch.int8, torch.uint8, torch.int16):  # (those fit; int64 and the unsigned wide ones may not)
        it = torch.where((it >= 0) & (it < 2 ** 31), it, torch.full_like(it, -1))
    return it.to(torch.int32)


def _format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is none of {sorted(FORMATS)}")
    return fmt


# ---- quantization (xstage/moe/quant.hpp's conventions, DeepGEMM's block scales) -----------------------------------

def _e4m3_blocks(b, dims):
    """quant.hpp's block rule on blocks laid out along `dims` of b: amax = max(|x|, 1e-4) per block, codes =
    e4m3(x * 448 / amax) (the product rounded to fp32 first), scales amax / 448 (kept dims, b's float dtype)."""
    import torch
    amax = b.abs().amax(dim=dims, keepdim=True).clamp_min(_AMAX_FLOOR)
    return (b * (_E4M3_MAX / amax)).float().to(torch.float8_e4m3fn), amax / _E4M3_MAX


def quantize_act(x):
    """x [T, H] (any float dtype, H a multiple of 128) -> (codes float8_e4m3fn [T, H], scales float32 [T, H/128]):
    per token and 128 channels, amax = max(|x|, 1e-4), code = e4m3(x * 448 / amax), scale = amax / 448."""
    if x.dim() != 2 or x.shape[1] % _BLOCK:
        raise ValueError(f"x must be [T, H] with H a multiple of {_BLOCK}, got {tuple(x.shape)}")
    T, H = x.shape
    codes, scale = _e4m3_blocks(x.float().reshape(T, H // _BLOCK, _BLOCK), -1)
    return codes.reshape(T, H), scale.reshape(T, H // _BLOCK)


def _quantize_weight_128x128(w):
    E, N, K = w.shape
    codes, scale = _e4m3_blocks(w.float().reshape(E, N // _BLOCK, _BLOCK, K // _BLOCK, _BLOCK), (2, 4))
    deq = (codes.float() * scale).reshape(E, N, K)
    return codes.reshape(E, N, K), scale.reshape(E, N // _BLOCK, K // _BLOCK), deq


def _quantize_int4(w, stream):
    """[E, N, K] -> (fragment-layout bytes [E, N, K/2], scales K-block-major [E, K/128, N], dequantized [E, N, K])."""
    import torch
    E, N, K = w.shape
    g = w.float().reshape(E, N, K // _BLOCK, _BLOCK)
    amax = g.abs().amax(-1).clamp_min(_AMAX_FLOOR)                              # [E, N, K/128]
    q = torch.round(g * (7.0 / amax).unsqueeze(-1)).clamp_(-8, 7).to(torch.int8)  # rne, as quantize_int4
    scale = amax / 7.0
    deq = (q.float() * scale.unsqueeze(-1)).reshape(E, N, K)
    nib = (q.reshape(E, N, K) & 0xF).to(torch.uint8)
    twos = (nib[..., 0::2] | (nib[..., 1::2] << 4)).contiguous()               # even k in the low nibble
    frag = torch.empty_like(twos)
    _team._ok(_lib().xstage_moe_pack_int4(twos.data_ptr(), frag.data_ptr(), E, N, K, ctypes.c_void_p(stream)))
    return frag, scale.permute(0, 2, 1).contiguous(), deq


@dataclass
class MoeWeights:
    """One rank's experts in a kernel format (quantize_weights makes it). w1 [E_local, 2I, H], w2 [E_local, H, I] in
    the format's storage; ref_w1 / ref_w2 the values the kernel multiplies, float32 (kept only when asked)."""
    format: str
    experts: int
    hidden: int
    inter: int
    w1: object
    w1_scale: object
    w2: object
    w2_scale: object
    ref_w1: object = None
    ref_w2: object = None


def quantize_weights(w1, w2, format: str = "w8a8", keep_reference: bool = False) -> MoeWeights:
    """This rank's expert weights w1 [E_local, 2I, H] (gate rows, then up rows) and w2 [E_local, H, I], any float
    dtype on the GPU, into `format`: "w8a8" (e4m3 + 128x128 block scales), "w4a8" (int4 + one scale per row and
    128-group, in the kernel's fragment layout) or "bf16". keep_reference keeps the dequantized values (float32) for
    moe_reference."""
    import torch
    _format(format)
    if w1.dim() != 3 or w2.dim() != 3:
        raise ValueError(f"w1 and w2 must be [experts, 2I, H] and [experts, H, I], got {tuple(w1.shape)}, "
                         f"{tuple(w2.shape)}")
    E, two_i, H = w1.shape
    if two_i % 2 or tuple(w2.shape) != (E, H, two_i // 2):
        raise ValueError(f"w1 {tuple(w1.shape)} and w2 {tuple(w2.shape)} disagree: want w1 [E, 2I, H], w2 [E, H, I]")
    I = two_i // 2
    if H % _BLOCK or I % _BLOCK:
        raise ValueError(f"hidden {H} and inter {I} must be multiples of {_BLOCK}")
    if not (w1.is_cuda and w2.is_cuda):
        raise ValueError("w1 and w2 must be CUDA tensors")
    if format == "bf16":
        a, b = w1.to(torch.bfloat16).contiguous(), w2.to(torch.bfloat16).contiguous()
        return MoeWeights(format, E, H, I, a, None, b, None,
                          a.float() if keep_reference else None, b.float() if keep_reference else None)
    if format == "w8a8":
        c1, s1, d1 = _quantize_weight_128x128(w1)
        c2, s2, d2 = _quantize_weight_128x128(w2)
    else:
        stream = torch.cuda.current_stream(w1.device).cuda_stream
        c1, s1, d1 = _quantize_int4(w1, stream)
        c2, s2, d2 = _quantize_int4(w2, stream)
    return MoeWeights(format, E, H, I, c1, s1, c2, s2, d1 if keep_reference else None, d2 if keep_reference else None)


# ---- the layer ---------------------------------------------------------------------------------------------------

def _as_list(v, n, name):
    many = isinstance(v, (list, tuple))
    if n > 1 and not many:
        raise ValueError(f"this process serves {n} ranks: pass a list of {n} tensors for {name}")
    vs = list(v) if many else [v]
    if len(vs) != n:
        raise ValueError(f"this process serves {n} ranks: {name} has {len(vs)} tensors")
    return vs


class MoeLayer(_team._Handle):
    """One layer shape and format on one team (its symmetric buffers are allocated once, collectively)."""
    _destroy = "xstage_moe_destroy"

    def __init__(self, team: "_team.Team", hidden: int, inter: int, experts: int, topk: int, tokens_per_rank: int,
                 format: str = "w8a8"):
        self.team, self.format = team, _format(format)
        self.hidden, self.inter, self.experts, self.topk, self.tokens = (int(hidden), int(inter), int(experts),
                                                                          int(topk), int(tokens_per_rank))
        self._pinned = None  # host staging of the routing (pinned, reused)
        self._auto = None    # order="auto" resolved (auto_order())
        h = ctypes.c_void_p()
        _team._ok(_lib().xstage_moe_create(team._h, self.hidden, self.inter, self.experts, self.topk, self.tokens,
                                           FORMATS[format], ctypes.byref(h)))
        self._h = h
        team._adopt(self)

    def auto_order(self, skewed: bool = False, platform: str | None = None, tokens: int | None = None):
        """The tile order the platform model picks for this layer on this team (bench_moe's `auto`): at P = 1 the
        simulator's faster order (on a tie, Interleaved where an expert holds at most two 128-row tiles; Expert-Wave with
        lagged waves, "expert-wave-lagged", where it predicts that >= 5 % faster than both; every Linear-1 tile first,
        "l1-first", where it predicts that strictly faster than both plain orders), at P > 1 the
        Burst-Gap design test of the combine stores (docs/SCHEDULERS.md). tokens: the tokens per rank to choose for
        (default: the layer's capacity, tokens_per_rank, as order="auto" does); with fewer, an expert holds fewer rows
        and the order that pays can differ, so a caller whose calls are much smaller than the capacity can ask for
        theirs and pass the order.
        platform: a preset name or a platform JSON file (default "h200-nvlink4"). Returns (order, lead, reason)."""
        order, lead = ctypes.c_int(), ctypes.c_int()
        buf = ctypes.create_string_buffer(1024)
        n = self.tokens if tokens is None else int(tokens)
        if tokens is not None and not 1 <= n <= self.tokens:
            raise ValueError(f"tokens {tokens!r} must be in [1, {self.tokens}] (the layer's tokens per rank)")
        _team._ok(_lib().xstage_moe_auto_order(self._h, n, int(bool(skewed)), platform.encode() if platform else None,
                                               ctypes.byref(order), ctypes.byref(lead), buf, len(buf)))
        name = {v: k for k, v in ORDERS.items()}[order.value]
        return name, lead.value, buf.value.decode()

    def _routing_on_host(self, idxs):
        """Every rank's top-k indices, [world * T * k] int32 on the host, through a pinned buffer kept by the layer (the
        C ABI copies it during the call, so the next call may reuse it)."""
        import torch
        mine = _ids32(idxs[0]).reshape(-1) if len(idxs) == 1 else torch.cat([_ids32(i).reshape(-1) for i in idxs])
        if self.team.local_ranks != self.team.world:
            group = getattr(self.team, "group", None)
            if group is None:
                raise ValueError("a real team's routing must be gathered from every rank: make the team with "
                                 "Team.from_process_group")
            import torch.distributed as dist
            if dist.get_backend(group) == "nccl" and self.team.device is not None:
                mine = mine.to(torch.device("cuda", self.team.device))  # NCCL gathers device tensors only
            # Every rank's count first: gathers of unequal sizes are undefined (they can hang), so a rank with
            # another token count is named on every rank, which all raise alike.
            counts = [None] * self.team.world
            dist.all_gather_object(counts, int(mine.numel()) // self.topk, group=group)
            if len(set(counts)) > 1:
                raise ValueError(f"plan='host' needs the same token count on every rank, got {counts} (by rank); "
                                 "use plan='device'")
            if dist.get_backend(group) != "nccl":  # gloo and friends gather on the host
                parts = [torch.empty_like(mine.cpu()) for _ in range(self.team.world)]
                dist.all_gather(parts, mine.cpu(), group=group)
                return torch.cat(parts).contiguous()
            gathered = torch.empty(self.team.world * mine.numel(), dtype=torch.int32, device=mine.device)
            dist.all_gather_into_tensor(gathered, mine.contiguous(), group=group)
            mine = gathered
        if not mine.is_cuda:
            return mine.contiguous()
        if self._pinned is None or self._pinned.numel() != mine.numel():
            self._pinned = torch.empty(mine.numel(), dtype=torch.int32, pin_memory=True)
        self._pinned.copy_(mine, non_blocking=True)
        torch.cuda.current_stream(mine.device).synchronize()
        return self._pinned

    def __call__(self, x, topk_idx, topk_weight, weights: MoeWeights, x_scale=None, order: str = "interleaved",
                 out=None, plan: str = "device"):
        """x: [n, H] per rank, n <= tokens_per_rank (the layer's capacity; a rank may pass fewer tokens, or none):
        bf16 / fp16 / fp32 (quantized here for w8a8 / w4a8), or float8_e4m3fn codes with x_scale [n, H/128] float32;
        bf16 for the bf16 format. topk_idx [n, k] (global expert ids, each token's k distinct), topk_weight [n, k]
        (float32). order: "interleaved", "expert-wave", "expert-wave-lagged" (each wave's Linear-2 tiles after the next
        wave's Linear-1 tiles), "l1-first" (every Linear-1 tile before any Linear-2 tile) or "auto" (auto_order() for a
        balanced routing); all give the same bits. out: optional
        [n, H] float32 tensors to write. Returns out. With plan="device" each rank's n is its own; plan="host" needs
        the same n on every rank.
        plan: "device" (the default) makes the dispatch plan on the GPU from topk_idx where it lies, the ranks
        exchanging their counts by peer stores: the call never waits for the GPU, and an invalid index is raised by
        check() (that rank's out is then not written). "host" gathers every rank's topk_idx to the host (a
        synchronisation) and plans there: an invalid index raises here, before the layer's kernels are enqueued (x's
        quantization and the gather of the ranks' routing have run by then). Same result either
        way, bit for bit; every rank of a real team must use the same plan. With plan="device" the call can be captured in
        a CUDA graph (torch.cuda.graph) after one warm-up call, and replayed on new inputs copied into the same tensors."""
        import torch
        if plan not in ("device", "host"):
            raise ValueError(f"plan {plan!r} is neither 'device' nor 'host'")
        if plan == "host" and torch.cuda.is_current_stream_capturing():
            raise ValueError("plan='host' reads the routing on the host, which a CUDA graph replay would not read again; "
                             "capture the call with plan='device'")
        n, H, k = self.team.local_ranks, self.hidden, self.topk
        if order == "auto":  # the model's choice for a balanced routing on the default platform, asked once
            if self._auto is None:
                self._auto = self.auto_order()[0]
            order = self._auto
        if order not in ORDERS:
            raise ValueError(f"order {order!r} is none of {sorted(ORDERS) + ['auto']}")
        if not isinstance(weights, MoeWeights) or weights.format != self.format:
            raise ValueError(f"weights must be MoeWeights of format {self.format!r} (quantize_weights), got "
                             f"{getattr(weights, 'format', type(weights).__name__)!r}")
        e_local = n * self.experts // self.team.world
        if (weights.experts, weights.hidden, weights.inter) != (e_local, H, self.inter):
            raise ValueError(f"weights hold {weights.experts} experts of hidden {weights.hidden}, inter {weights.inter}; "
                             f"this layer needs the {e_local} experts of its local ranks, hidden {H}, inter {self.inter}")
        dev = getattr(self.team, "device", None)
        if dev is not None and weights.w1.device.index != dev:
            raise ValueError(f"the weights are on cuda:{weights.w1.device.index}, the team's ranks on cuda:{dev}")
        xs, idxs, ws = (_as_list(v, n, name) for v, name in ((x, "x"), (topk_idx, "topk_idx"),
                                                            (topk_weight, "topk_weight")))
        scales = _as_list(x_scale, n, "x_scale") if x_scale is not None else [None] * n
        outs = _as_list(out, n, "out") if out is not None else [None] * n
        # Tensors made here (quantized x, converted weights) must live until the kernel is enqueued: freed earlier, the
        # caching allocator would hand one rank's memory to the next rank's conversion. After the launch their reuse is
        # ordered after the kernel on this stream.
        keep = []
        xp, sp, wp, op, ip, tp = [], [], [], [], [], []
        for g in range(n):
            xt, st = xs[g], scales[g]
            if (not isinstance(xt, torch.Tensor) or not xt.is_cuda or xt.dim() != 2 or xt.shape[1] != H
                    or xt.shape[0] > self.tokens):
                raise ValueError(f"x must be a CUDA tensor [n, {H}] with n <= {self.tokens} (the layer's tokens per "
                                 f"rank), got {tuple(xt.shape) if isinstance(xt, torch.Tensor) else type(xt).__name__}")
            T = xt.shape[0]
            tp.append(T)
            if dev is not None and xt.device.index != dev:
                raise ValueError(f"x is on cuda:{xt.device.index}, the team's ranks on cuda:{dev}")
            if self.format == "bf16":
                if st is not None or xt.dtype == torch.float8_e4m3fn:
                    raise ValueError("the bf16 format takes unquantized x (bf16, fp16 or fp32) and no x_scale")
                xt = xt.to(torch.bfloat16).contiguous()
            elif xt.dtype == torch.float8_e4m3fn:
                if (not isinstance(st, torch.Tensor) or tuple(st.shape) != (T, H // _BLOCK) or st.dtype != torch.float32
                        or st.device != xt.device):
                    raise ValueError(f"float8 x needs x_scale float32 [{T}, {H // _BLOCK}] on {xt.device}, got "
                                     + (f"{st.dtype} {tuple(st.shape)} on {st.device}" if isinstance(st, torch.Tensor)
                                        else type(st).__name__))
                xt, st = xt.contiguous(), st.contiguous()
            else:
                if st is not None:
                    raise ValueError("x_scale goes with float8_e4m3fn codes; pass unquantized x without it")
                xt, st = quantize_act(xt)
            it, wt = idxs[g], ws[g]
            if tuple(it.shape) != (T, k) or tuple(wt.shape) != (T, k):
                raise ValueError(f"topk_idx and topk_weight must be [{T}, {k}], got {tuple(it.shape)}, "
                                 f"{tuple(wt.shape)}")
            if it.dtype.is_floating_point or it.dtype.is_complex or it.dtype == torch.bool:
                raise ValueError(f"topk_idx must be an integer tensor, got {it.dtype}")
            wt = wt.to(device=xt.device, dtype=torch.float32).contiguous()
            ot = outs[g]
            if ot is None:
                ot = torch.empty(T, H, device=xt.device, dtype=torch.float32)
            elif not (isinstance(ot, torch.Tensor) and ot.device == xt.device and ot.dtype == torch.float32
                      and tuple(ot.shape) == (T, H) and ot.is_contiguous()):
                raise ValueError(f"out must be contiguous float32 tensors [{T}, {H}] on {xt.device}, got "
                                 + (f"{ot.dtype} {tuple(ot.shape)} on {ot.device}" if isinstance(ot, torch.Tensor)
                                    else type(ot).__name__))
            outs[g] = ot
            if plan == "device":
                it = _ids32(it.to(device=xt.device)).contiguous()
                ip.append(it.data_ptr())
            keep += [xt, st, wt, it]
            xp.append(xt.data_ptr())
            sp.append(st.data_ptr() if st is not None else None)
            wp.append(wt.data_ptr())
            op.append(ot.data_ptr())
        arr = ctypes.c_void_p * n
        stream = torch.cuda.current_stream(xs[0].device).cuda_stream
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        tail = (arr(*xp), arr(*sp) if self.format != "bf16" else None, arr(*wp), arr(*op), ptr(weights.w1),
                ptr(weights.w1_scale), ptr(weights.w2), ptr(weights.w2_scale), ORDERS[order], ctypes.c_void_p(stream))
        counts = (ctypes.c_int * n)(*tp)
        if plan == "device":
            _team._ok(_lib().xstage_moe_forward_device(self._h, counts, arr(*ip), *tail))
        else:
            if len(set(tp)) > 1:
                raise ValueError(f"plan='host' needs the same token count on every rank, got {tp}; use plan='device'")
            routing = self._routing_on_host(idxs)
            _team._ok(_lib().xstage_moe_forward(
                self._h, counts, routing.numpy().ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), *tail))
        del keep
        return outs if n > 1 or isinstance(x, (list, tuple)) else outs[0]

    def check(self, what: str = "moe layer", stream=None):
        """Waits for `stream` (default: torch's current one) and the team's work, and raises XstageError naming a
        device-side failure of the layer: an invalid top-k index a device plan found (rank, token, slot, value), or a
        rank that waited for a peer's rows (with the peer)."""
        import torch
        s = ctypes.c_void_p((stream if stream is not None else torch.cuda.current_stream()).cuda_stream)
        _team._ok(_lib().xstage_moe_check(self._h, s, what.encode()))


# ---- float64 reference -------------------------------------------------------------------------------------------

def moe_reference(x, topk_idx, topk_weight, weights: MoeWeights, x_scale=None, exact: bool = False):
    """The layer over ONE global batch in float64: x [N, H] (float8 codes with x_scale, or unquantized: quantized as
    the layer does), topk_idx / topk_weight [N, k] over all E experts, weights holding all E experts with
    keep_reference=True. exact=False applies what the kernel rounds beyond its inputs (h = silu(g) * u to e4m3 with 1x128
    scales, or to bf16 for the bf16 format; each expert output to bf16); exact=True keeps float64 throughout.
    The routing is checked as the layer checks it: an id outside [0, E) or repeated within a token is a ValueError
    naming the token and slot (a reference that skipped or double-counted it would disagree with the layer silently)."""
    import torch
    if weights.ref_w1 is None:
        raise ValueError("moe_reference needs weights made with quantize_weights(..., keep_reference=True)")
    idx = topk_idx.long()
    E = weights.experts
    bad = ((idx < 0) | (idx >= E)).nonzero()
    if bad.numel():
        t, s = (int(v) for v in bad[0])
        raise ValueError(f"topk_idx token {t}, slot {s}: expert {int(idx[t, s])} is out of range [0, {E})")
    srt = idx.sort(dim=1).values
    rep = (srt[:, 1:] == srt[:, :-1]).any(dim=1).nonzero()
    if rep.numel():
        raise ValueError(f"topk_idx token {int(rep[0])}: an expert repeats ({idx[int(rep[0])].tolist()}); a token's "
                         f"experts must be distinct")
    if weights.format == "bf16":
        a = x.to(torch.bfloat16).double()
    else:
        if x.dtype != torch.float8_e4m3fn:
            x, x_scale = quantize_act(x)
        elif x_scale is None:
            raise ValueError("float8 x needs its x_scale (float32 [N, H/128])")
        N, H = x.shape
        a = (x.float().double().reshape(N, H // _BLOCK, _BLOCK) * x_scale.double().unsqueeze(-1)).reshape(N, H)
    N, H = a.shape
    I = weights.inter
    out = torch.zeros(N, H, dtype=torch.float64, device=a.device)
    idx = idx.to(a.device)
    for e in range(weights.experts):
        tok, slot = (idx == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        w1 = weights.ref_w1[e].double()
        gu = a[tok] @ w1.T
        h = torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]
        if not exact:
            if weights.format == "bf16":
                h = h.float().bfloat16().double()
            else:
                codes, scale = _e4m3_blocks(h.reshape(-1, I // _BLOCK, _BLOCK), -1)
                h = (codes.float().double() * scale).reshape(-1, I)
        y = h @ weights.ref_w2[e].double().T
        if not exact:
            y = y.float().bfloat16().double()
        out.index_add_(0, tok, y * topk_weight[tok, slot].double().unsqueeze(-1))
    return out
