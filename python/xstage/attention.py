"""FlashAttention forward (sm_90a) on torch tensors, through the C ABI of libxstage_attention.so.

ctypes only: torch is imported when a function that takes tensors is called, never at import time.
The library is found through XSTAGE_ATTENTION_LIB, else build/src/kernels/attention/ under the repo.

    from xstage.attention import flash_attn_fwd
    out = flash_attn_fwd(q, k, v)                       # q: (batch, seq_q, heads, dim), k/v: (batch, seq_kv, heads, dim)
    out, lse = flash_attn_fwd(q, k, v, return_lse=True)  # lse: (batch, heads, seq_q) float32, natural log
"""
from __future__ import annotations

import ctypes
import math
import os
from pathlib import Path

__all__ = ["flash_attn_fwd", "check", "last_error", "library_path", "library_version", "XstageError", "Params",
           "DTYPE_BF16", "DTYPE_FP16", "OK", "ERR_CUDA", "ERR_INVALID", "ERR_UNSUPPORTED"]

# Mirrors include/xstage/attention.h.
DTYPE_BF16, DTYPE_FP16 = 0, 1
OK, ERR_CUDA, ERR_INVALID, ERR_UNSUPPORTED = 0, 1, 2, 3
_STATUS = {ERR_CUDA: "XSTAGE_ERR_CUDA", ERR_INVALID: "XSTAGE_ERR_INVALID", ERR_UNSUPPORTED: "XSTAGE_ERR_UNSUPPORTED"}


class Params(ctypes.Structure):
    """xstage_attn_fwd_params (ctypes applies the same alignment rules as the C compiler)."""
    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_kv", ctypes.c_int),
        ("heads", ctypes.c_int), ("head_dim", ctypes.c_int),
        ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3),
        ("v_stride", ctypes.c_int64 * 3), ("o_stride", ctypes.c_int64 * 3),
        ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int), ("dtype", ctypes.c_int),
    ]


class XstageError(RuntimeError):
    """A call into libxstage_attention failed; `code` is the xstage_status, the message its last error."""

    def __init__(self, code: int, message: str):
        super().__init__(f"{_STATUS.get(code, code)}: {message}")
        self.code = code


_lib = None


def library_path() -> Path:
    env = os.environ.get("XSTAGE_ATTENTION_LIB")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]  # python/xstage/attention.py -> repo root
    return repo / "build" / "src" / "kernels" / "attention" / "libxstage_attention.so"


def _load():
    global _lib
    if _lib is None:
        path = library_path()
        if not path.is_file():
            raise OSError(f"libxstage_attention.so not found at {path}: build the target xstage_attention "
                          f"or set XSTAGE_ATTENTION_LIB to the library's path")
        lib = ctypes.CDLL(str(path))
        lib.xstage_attn_fwd.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p]
        lib.xstage_attn_fwd.restype = ctypes.c_int
        lib.xstage_attn_fwd_check.argtypes = [ctypes.POINTER(Params)]
        lib.xstage_attn_fwd_check.restype = ctypes.c_int
        lib.xstage_last_error.argtypes = []
        lib.xstage_last_error.restype = ctypes.c_char_p
        lib.xstage_version.argtypes = []
        lib.xstage_version.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def library_version() -> str:
    """The loaded library's build, "xstage 0.1.0 (git <revision>)": which build a result came from (the package's own
    version is xstage.__version__)."""
    return _load().xstage_version().decode()


def last_error() -> str:
    """The calling thread's last error message from the library ('' after a success)."""
    return _load().xstage_last_error().decode()


def check(params: Params) -> int:
    """xstage_attn_fwd_check: validation alone, no device needed. Returns the status code."""
    return _load().xstage_attn_fwd_check(ctypes.byref(params))


def _strides(t, name: str):
    """Element strides (batch, seq, head) of a (batch, seq, heads, dim) tensor with dim stride 1.
    A dimension of extent 1 is never stepped over, so its stride (arbitrary in torch) is replaced by
    one that satisfies the library's alignment rule."""
    if t.shape[3] > 1 and t.stride(3) != 1:
        raise ValueError(f"{name} must have stride 1 in its last (head_dim) dimension, got stride {t.stride(3)}")
    return [t.stride(i) if t.shape[i] > 1 else t.shape[3] for i in range(3)]


def _float32(x: float) -> float:
    """x rounded to the float32 the C ABI passes."""
    return ctypes.c_float(x).value


def _check_inputs(q, k, v, softmax_scale):
    """The checks every entry point that takes q, k, v makes before any work (ValueError naming the bad value):
    4-D CUDA tensors of one device and dtype (bf16 or fp16), k and v alike and matching q in batch, heads and dim,
    dim 64 or 128, nothing empty, softmax_scale None or positive and finite (also as the float32 the kernel
    takes). Returns the scale to pass (1/sqrt(dim) for None)."""
    import torch
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
        if t.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions (batch, seq, heads, dim), got shape {tuple(t.shape)}")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"q.dtype = {q.dtype} is not supported (torch.bfloat16 or torch.float16)")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name}.dtype = {t.dtype} differs from q.dtype = {q.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, q on {q.device}")
    batch, seqlen_q, heads, dim = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k.shape = {tuple(k.shape)} differs from v.shape = {tuple(v.shape)}")
    if k.shape[0] != batch or k.shape[2] != heads or k.shape[3] != dim:
        raise ValueError(f"k/v shape {tuple(k.shape)} does not match q shape {tuple(q.shape)} "
                         f"in batch, heads or dim")
    if dim not in (64, 128):
        raise ValueError(f"head_dim = {dim} is not supported (64 or 128)")
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(dim)
    elif not (math.isfinite(softmax_scale) and softmax_scale > 0):
        raise ValueError(f"softmax_scale = {softmax_scale} must be a positive finite number")
    elif not 0 < _float32(softmax_scale) < math.inf:
        # (the kernel takes a float32: 1e-50 would round to 0, which it reads as "the default 1/sqrt(d)")
        raise ValueError(f"softmax_scale = {softmax_scale} is {_float32(softmax_scale)} as the float32 the kernel "
                         f"takes; it must be positive and finite there")
    if 0 in (batch, seqlen_q, heads, k.shape[1]):
        raise ValueError(f"empty tensors: q {tuple(q.shape)}, k {tuple(k.shape)}")
    return float(softmax_scale)


def flash_attn_fwd(q, k, v, softmax_scale=None, causal=False, return_lse=False, out=None):
    """softmax(q kᵀ · scale) v per (batch, head).

    q: (batch, seq_q, heads, dim); k, v: (batch, seq_kv, heads, dim); bf16 or fp16 CUDA tensors on
    one device, dim 64 or 128, stride 1 in dim and the other strides multiples of 16 bytes, data 16-byte aligned
    (TMA's rules: a stride 1 missing in dim is a ValueError, the rest an XstageError with code ERR_INVALID naming
    the stride or pointer). softmax_scale defaults to
    1/sqrt(dim). causal: bottom-right aligned (query i sees keys j <= i + seq_kv - seq_q).
    out: optional preallocated output like q. Runs on torch's current stream of q's device.
    Returns out, or (out, lse) with lse (batch, heads, seq_q) float32 (natural-log log-sum-exp).
    """
    import torch

    softmax_scale = _check_inputs(q, k, v, softmax_scale)
    batch, seqlen_q, heads, dim = q.shape
    if out is None:
        out = torch.empty((batch, seqlen_q, heads, dim), dtype=q.dtype, device=q.device)
    elif not isinstance(out, torch.Tensor) or out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(f"out must be a tensor of q's shape {tuple(q.shape)}, dtype {q.dtype} and device "
                         f"{q.device}; got {getattr(out, 'shape', type(out).__name__)}")
    lse = torch.empty((batch, heads, seqlen_q), dtype=torch.float32, device=q.device) if return_lse else None

    p = Params()
    p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
    p.lse = lse.data_ptr() if lse is not None else None
    p.batch, p.seqlen_q, p.seqlen_kv, p.heads, p.head_dim = batch, seqlen_q, k.shape[1], heads, dim
    for field, t, name in (("q_stride", q, "q"), ("k_stride", k, "k"), ("v_stride", v, "v"), ("o_stride", out, "out")):
        getattr(p, field)[:] = _strides(t, name)
    p.softmax_scale = float(softmax_scale)
    p.causal = 1 if causal else 0
    p.dtype = DTYPE_BF16 if q.dtype == torch.bfloat16 else DTYPE_FP16

    lib = _load()
    with torch.cuda.device(q.device):  # the library launches on the current device
        stream = torch.cuda.current_stream(q.device).cuda_stream
        rc = lib.xstage_attn_fwd(ctypes.byref(p), ctypes.c_void_p(stream))
    if rc != OK:
        raise XstageError(rc, last_error())
    return (out, lse) if return_lse else out
