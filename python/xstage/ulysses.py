"""Ulysses sequence-parallel attention with the post-attention all-to-all fused into the attention epilogue
(xstage's sm_90a kernel), on torch tensors, through the C ABI of libxstage_attention.so (xstage/ulysses.h).

    import torch.distributed as dist
    from xstage.team import Team
    from xstage.ulysses import ulysses_attention
    team = Team.from_process_group()               # torchrun: one process per GPU
    out = ulysses_attention(q, k, v, team)          # q, k, v: this rank's (batch, S/P, heads, dim)

Each rank passes its own sequence slice; the result is its slice of attention over the full sequence
(world * S/P tokens), every head. heads must be divisible by the world size; head_dim 64 or 128; bf16 or
fp16; non-causal. The returned tensor is a view of the layer's output buffer, valid until the second next
call with the same shape (clone it to keep it). With a team that serves several ranks from this process
(Team.emulated(P), P > 1), q, k and v are lists of the P ranks' tensors and a list is returned.
"""
from __future__ import annotations

import ctypes

from . import attention as _attn
from . import team as _team

__all__ = ["UlyssesAttention", "ulysses_attention", "FUSED", "SERIAL"]

FUSED, SERIAL = 0, 1


def _lib():
    lib = _team._lib()
    if not getattr(lib, "_xstage_ulysses_ready", False):
        vp, i = ctypes.c_void_p, ctypes.c_int
        lib.xstage_ulysses_create.argtypes = [vp, i, i, i, i, i, ctypes.c_float, ctypes.POINTER(vp)]
        lib.xstage_ulysses_create.restype = i
        lib.xstage_ulysses_destroy.argtypes = [vp]
        lib.xstage_ulysses_destroy.restype = None
        lib.xstage_ulysses_forward.argtypes = [vp, ctypes.POINTER(vp), ctypes.POINTER(vp), ctypes.POINTER(vp), i, vp,
                                               ctypes.POINTER(vp)]
        lib.xstage_ulysses_forward.restype = i
        lib._xstage_ulysses_ready = True
    return lib


class UlyssesAttention(_team._Handle):
    """One layer shape on one team: (batch, seq_per_rank, heads, head_dim) per rank."""
    _destroy = "xstage_ulysses_destroy"

    def __init__(self, team: "_team.Team", batch: int, seq_per_rank: int, heads: int, head_dim: int, dtype,
                 softmax_scale: float | None = None):
        import math

        import torch
        if dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"dtype {dtype} is not supported (torch.bfloat16 or torch.float16)")
        self.team, self.dtype = team, dtype
        self.shape = (int(batch), int(seq_per_rank), int(heads), int(head_dim))
        h = ctypes.c_void_p()
        # As flash_attn_fwd: None is 1/sqrt(head_dim); anything else positive and finite, also as the float32 passed
        # (the library reads <= 0 as "the default", which a caller's negative or underflowing scale must not become).
        if softmax_scale is not None and not (math.isfinite(softmax_scale) and softmax_scale > 0
                                              and 0 < _attn._float32(softmax_scale) < math.inf):
            raise ValueError(f"softmax_scale = {softmax_scale} must be a positive finite number (as a float32 too)")
        scale = 0.0 if softmax_scale is None else float(softmax_scale)
        _team._ok(_lib().xstage_ulysses_create(team._h, *self.shape,
                                               _attn.DTYPE_BF16 if dtype == torch.bfloat16 else _attn.DTYPE_FP16,
                                               scale, ctypes.byref(h)))
        self._h = h
        team._adopt(self)

    def _check(self, name, t):
        import torch
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor, got "
                             + (f"one on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__))
        if self.team.device is not None and t.device != torch.device("cuda", self.team.device):
            raise ValueError(f"{name} is on {t.device}, the team's ranks on cuda:{self.team.device}")
        if tuple(t.shape) != self.shape or t.dtype != self.dtype:
            raise ValueError(f"{name} must be {self.dtype} of shape {self.shape} (batch, seq_per_rank, heads, dim), "
                             f"got {t.dtype} {tuple(t.shape)}")
        return t if t.is_contiguous() else t.contiguous()

    def __call__(self, q, k, v, variant: int = FUSED):
        import torch
        many = self.team.local_ranks > 1
        qs, ks, vs = (list(x) if many else [x] for x in (q, k, v))
        n = self.team.local_ranks
        if not (len(qs) == len(ks) == len(vs) == n):
            raise ValueError(f"this process serves {n} ranks: pass {n} tensors each for q, k, v")
        qs = [self._check("q", t) for t in qs]
        ks = [self._check("k", t) for t in ks]
        vs = [self._check("v", t) for t in vs]
        arr = ctypes.c_void_p * n
        outs = arr()
        if variant not in (FUSED, SERIAL):
            raise ValueError(f"variant {variant!r} is neither FUSED ({FUSED}) nor SERIAL ({SERIAL})")
        with torch.cuda.device(qs[0].device):  # the library launches on the current device
            stream = torch.cuda.current_stream(qs[0].device).cuda_stream
            _team._ok(_lib().xstage_ulysses_forward(self._h, arr(*[t.data_ptr() for t in qs]),
                                                    arr(*[t.data_ptr() for t in ks]), arr(*[t.data_ptr() for t in vs]),
                                                    int(variant), ctypes.c_void_p(stream), outs))
        views = [self._view(outs[g]) for g in range(n)]
        return views if many else views[0]

    def _view(self, ptr):
        return _team.device_tensor(ptr, self.shape, self.dtype, owner=self, device=self.team.device)


def ulysses_attention(q, k, v, team: "_team.Team", softmax_scale: float | None = None, variant: int = FUSED):
    """The layer for q's shape on `team`, created on first use and cached on the team (per shape, dtype, scale): the
    cache goes with the team, so a later team never meets a layer of a closed one."""
    first = q[0] if isinstance(q, (list, tuple)) else q
    key = (tuple(first.shape), first.dtype, softmax_scale)
    layers = team.__dict__.setdefault("_ulysses_layers", {})
    layer = layers.get(key)
    if layer is None or not layer._h.value:  # (a layer closed with its team is made again only on a live team)
        layer = layers[key] = UlyssesAttention(team, *first.shape, first.dtype, softmax_scale)
    return layer(q, k, v, variant)
