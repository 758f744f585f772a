"""xstage as a diffusers attention backend: a diffusers transformer (Flux, Wan, ...) runs its attention through
xstage's sm_90a FlashAttention kernel, and under diffusers' Ulysses context parallelism through xstage's fused
Ulysses layer (all-to-all, attention and the all-to-all back in one call).

    import xstage.diffusers_backend as xd
    xd.enable(model)                          # registers the backend "xstage" and sets it on the model
    # (or: xd.register(); model.set_attention_backend("xstage"))
    # context parallelism, one process per GPU under torchrun:
    model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=world))   # after enable()
    xd.stats()                                # calls per path, fallbacks per reason

Read against diffusers 0.42.1 (PyPI wheel, diffusers/models/attention_dispatch.py, modeling_utils.py,
_modeling_parallel.py, hooks/context_parallel.py, transformers/transformer_flux.py, transformer_wan.py).
What this module relies on there:

  * AttentionBackendName (a str Enum) and _AttentionBackendRegistry.register(name, constraints,
    supports_context_parallel): the backend is a function called by dispatch_attention_fn with keyword
    arguments query, key, value (each (batch, seq, heads, head_dim), "BSHD": the processors unflatten the
    projections to (B, S, H, D) and _native_attention permutes to (B, H, S, D) only for SDPA), attn_mask,
    dropout_p, is_causal, scale, enable_gqa, return_lse and _parallel_config (the ParallelConfig the
    processor holds, or None). Since the Enum cannot be extended by subclassing, "xstage" is added to it
    as a member, so that ModelMixin.set_attention_backend("xstage"), attention_backend("xstage") and
    enable_parallelism's context-parallel check (supports_context_parallel) accept it.
  * Context parallelism: ModelMixin.enable_parallelism sets processor._parallel_config; the model's _cp_plan
    hooks split the sequence (dim 1) equally over the mesh before the blocks and gather after proj_out, so
    the backend sees each rank's (B, S/P, H, D) q/k/v and _parallel_config.context_parallel_config with
    ulysses_degree, ring_degree, ulysses_anything and _ulysses_mesh (get_group()). Native diffusers then
    runs TemplatedUlyssesAttention (all-to-all q/k/v, attention, all-to-all back); this backend replaces
    those three steps by ONE call of xstage.ulysses.ulysses_attention(q, k, v, team), the team built once
    per process group with Team.from_process_group(group) and cached.
  * Flux splits hidden_states AND encoder_hidden_states (its joint attention sees [txt_local, img_local] on
    each rank: a permutation of the full sequence, which non-causal attention does not mind). Wan passes
    parallel_config=None to its cross-attention (the text is not split: local queries against the full
    text), which this backend runs locally with flash_attn_fwd on every rank.

A call that xstage cannot serve goes to diffusers' native backend (which does its own context parallelism),
with a one-time XstageFallbackWarning naming the reason; nothing is served silently wrong. Every reason
depends only on the call's arguments and configuration, identical on every rank, so all ranks of a group
take the same path (one rank falling back while another runs xstage would deadlock). The decision logic
(decide()) imports neither torch nor diffusers, so it is tested on the CPU.

The fused Ulysses layer returns a view of an internal double buffer, valid until the second next call of
that shape. diffusers' Flux and Wan processors consume the attention output at once (flatten, split,
to_out), so it is returned without a copy; enable(copy_output=True) copies it for processors that keep it.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import threading
import warnings
from dataclasses import dataclass

__all__ = ["BACKEND", "DIFFUSERS_VERSION_READ", "enable", "register", "is_registered", "decide", "CallInfo",
           "CpInfo", "Decision", "describe", "replace_call", "stats", "reset_stats", "close_teams",
           "XstageFallbackWarning", "REASONS"]

BACKEND = "xstage"
DIFFUSERS_VERSION_READ = "0.42.1"

# Reasons a call goes to the native backend (key -> what the warning says).
REASONS = {
    "autograd": "q/k/v require grad with grad enabled; xstage is forward-only (run under torch.no_grad())",
    "device": "q/k/v are not CUDA tensors, or not on one device",
    "arch": "the GPU is not sm_90 (xstage's attention kernel is sm_90a)",
    "dtype": "dtype is not bfloat16/float16, or q/k/v dtypes differ",
    "head_dim": "head_dim is not 64 or 128",
    "shape": "q/k/v are not 4-D (batch, seq, heads, head_dim) with matching batch/heads/head_dim, or are empty",
    "gqa": "grouped-query attention (enable_gqa, or k/v heads differ from q heads)",
    "mask": "an attention mask is given",
    "causal": "is_causal=True",
    "dropout": "dropout_p > 0",
    "return_lse": "return_lse=True",
    "scale": "softmax scale is not a positive finite number",
    "ring": "ring attention (ring_degree > 1): xstage serves Ulysses only",
    "ulysses_anything": "ulysses_anything=True (uneven splits); xstage needs equal sequence shards",
    "heads_not_divisible": "heads not divisible by the Ulysses degree",
    "cp_cross": "q and k/v sequence lengths differ under Ulysses (xstage's layer is self-attention)",
    "cp_config": "context-parallel config without a Ulysses mesh",
    "library": "libxstage_attention could not be loaded",
    "ulysses_unavailable": "xstage.ulysses (the fused Ulysses layer) is not importable",
    "team": "an xstage team could not be built over the process group",
    "rejected": "xstage rejected the arguments",
}


class XstageFallbackWarning(UserWarning):
    """A diffusers attention call went to the native backend instead of xstage (once per reason)."""


@dataclass(frozen=True)
class CpInfo:
    """What decide() needs of diffusers' ContextParallelConfig."""
    ulysses_degree: int
    ring_degree: int = 1
    ulysses_anything: bool = False
    ring_anything: bool = False
    has_ulysses_mesh: bool = True


@dataclass(frozen=True)
class CallInfo:
    """One attention call, described without torch: shapes (batch, seq, heads, head_dim), dtype names
    ("bfloat16", ...), device type and compute capability (None when unknown), and the call's options."""
    q_shape: tuple
    k_shape: tuple
    v_shape: tuple
    dtypes: tuple = ("bfloat16", "bfloat16", "bfloat16")
    device_type: str = "cuda"
    capability: tuple | None = (9, 0)
    has_mask: bool = False
    dropout_p: float = 0.0
    is_causal: bool = False
    enable_gqa: bool = False
    return_lse: bool = False
    needs_grad: bool = False
    scale: float | None = None
    cp: CpInfo | None = None


@dataclass(frozen=True)
class Decision:
    path: str                 # "flash" (local flash_attn_fwd), "ulysses" (fused layer), "native" (fallback)
    reason: str | None = None  # a key of REASONS when path == "native"
    detail: str = ""


def replace_call(c: CallInfo, **changes) -> CallInfo:
    return dataclasses.replace(c, **changes)


def decide(c: CallInfo) -> Decision:
    """Which path serves the call. Pure: depends on nothing but `c` (identical on every rank of a group)."""
    def native(reason, detail=""):
        return Decision("native", reason, detail)

    if c.needs_grad:
        return native("autograd")
    if c.device_type != "cuda":
        return native("device", f"device type {c.device_type}")
    if c.capability is not None and tuple(c.capability) != (9, 0):
        return native("arch", f"compute capability {c.capability[0]}.{c.capability[1]}")
    if len(set(c.dtypes)) != 1 or c.dtypes[0] not in ("bfloat16", "float16"):
        return native("dtype", f"dtypes {c.dtypes}")
    shapes = (c.q_shape, c.k_shape, c.v_shape)
    if any(len(s) != 4 for s in shapes) or any(n <= 0 for s in shapes for n in s):
        return native("shape", f"shapes {shapes}")
    b, sq, h, d = c.q_shape
    if c.k_shape != c.v_shape or c.k_shape[0] != b or c.k_shape[3] != d:
        return native("shape", f"shapes {shapes}")
    if c.enable_gqa or c.k_shape[2] != h:
        return native("gqa", f"q heads {h}, k/v heads {c.k_shape[2]}")
    if d not in (64, 128):
        return native("head_dim", f"head_dim {d}")
    if c.has_mask:
        return native("mask")
    if c.is_causal:
        return native("causal")
    if c.dropout_p and c.dropout_p > 0:
        return native("dropout", f"dropout_p {c.dropout_p}")
    if c.return_lse:
        return native("return_lse")
    # (xstage takes the scale as a float32: one that rounds to 0 or inf there is diffusers' to run)
    if c.scale is not None and not (c.scale > 0 and 0 < ctypes.c_float(c.scale).value < float("inf")):
        return native("scale", f"scale {c.scale}")
    if c.cp is None:
        return Decision("flash")
    cp = c.cp
    if cp.ring_degree > 1 or cp.ring_anything:
        return native("ring", f"ring_degree {cp.ring_degree}, ulysses_degree {cp.ulysses_degree}")
    if cp.ulysses_anything:
        return native("ulysses_anything")
    if not cp.has_ulysses_mesh or cp.ulysses_degree < 1:
        return native("cp_config")
    if h % cp.ulysses_degree:
        return native("heads_not_divisible", f"heads {h}, Ulysses degree {cp.ulysses_degree}")
    if c.k_shape[1] != sq:
        return native("cp_cross", f"q seq {sq}, k/v seq {c.k_shape[1]} per rank")
    return Decision("ulysses")


# ---------------------------------------------------------------------------------------------------------
# State: options, counters, one-time warnings, teams per process group.

_lock = threading.Lock()
_opts = {"copy_output": False, "strict": os.environ.get("XSTAGE_DIFFUSERS_STRICT", "") not in ("", "0"),
         "team": None}
_counts = {"flash": 0, "ulysses": 0, "native": 0}
_fallbacks: dict = {}
_warned: set = set()
_teams: dict = {}          # id(group) -> (group, Team or Exception)
_capability: dict = {}     # device index -> (major, minor)
_member = None             # the AttentionBackendName member "xstage" once registered


def stats() -> dict:
    """Calls per path ('flash', 'ulysses', 'native') and fallbacks per reason since the last reset."""
    with _lock:
        return {**_counts, "fallbacks": dict(_fallbacks)}


def reset_stats():
    with _lock:
        for k in _counts:
            _counts[k] = 0
        _fallbacks.clear()
        _warned.clear()


def close_teams():
    """Frees the teams built over process groups (call before destroying the groups)."""
    with _lock:
        entries = list(_teams.values())
        _teams.clear()
    for _, team in entries:
        if hasattr(team, "close"):
            team.close()  # closes the fused layers cached on it first (Team.close)


def _count(path, reason=None, detail=""):
    with _lock:
        _counts[path] += 1
        if reason is None:
            return
        _fallbacks[reason] = _fallbacks.get(reason, 0) + 1
        first = reason not in _warned
        _warned.add(reason)
    if _opts["strict"]:
        raise RuntimeError(f"xstage diffusers backend (strict): falling back to native attention: "
                           f"{REASONS.get(reason, reason)}{': ' + detail if detail else ''}")
    if first:
        warnings.warn(f"xstage attention backend: falling back to diffusers' native attention "
                      f"({reason}: {REASONS.get(reason, reason)}{'; ' + detail if detail else ''}); "
                      f"warned once per reason", XstageFallbackWarning, stacklevel=4)


# ---------------------------------------------------------------------------------------------------------
# torch / diffusers side.

def _cp_info(parallel_config):
    """CpInfo from a diffusers ParallelConfig (None when it holds no context parallelism)."""
    if parallel_config is None:
        return None
    cp = getattr(parallel_config, "context_parallel_config", None)
    if cp is None:
        return None
    return CpInfo(ulysses_degree=int(getattr(cp, "ulysses_degree", 1) or 1),
                  ring_degree=int(getattr(cp, "ring_degree", 1) or 1),
                  ulysses_anything=bool(getattr(cp, "ulysses_anything", False)),
                  ring_anything=bool(getattr(cp, "ring_anything", False)),
                  has_ulysses_mesh=getattr(cp, "_ulysses_mesh", None) is not None)


def _device_capability(t):
    import torch
    if t.device.type != "cuda":
        return None
    idx = t.device.index if t.device.index is not None else torch.cuda.current_device()
    if idx not in _capability:
        _capability[idx] = tuple(torch.cuda.get_device_capability(idx))
    return _capability[idx]


def describe(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
             return_lse=False, _parallel_config=None) -> CallInfo:
    """The CallInfo of a backend call on torch tensors."""
    import torch
    ts = (query, key, value)
    return CallInfo(
        q_shape=tuple(query.shape), k_shape=tuple(key.shape), v_shape=tuple(value.shape),
        dtypes=tuple(str(t.dtype).replace("torch.", "") for t in ts),
        device_type=query.device.type if all(t.device == query.device for t in ts) else "mixed",
        capability=_device_capability(query),
        has_mask=attn_mask is not None, dropout_p=float(dropout_p or 0.0), is_causal=bool(is_causal),
        enable_gqa=bool(enable_gqa), return_lse=bool(return_lse),
        needs_grad=torch.is_grad_enabled() and any(t.requires_grad for t in ts),
        scale=None if scale is None else float(scale), cp=_cp_info(_parallel_config))


def _team_for(group, world):
    """The xstage Team over `group` (collective on first use: every rank of the group gets here at the same
    call). Raises ValueError when the topology rules a team out (same answer on every rank); a failure while making
    it (e.g. no NVLink/P2P path between the GPUs) is raised as it came, not taken as a fallback."""
    explicit = _opts["team"]
    if explicit is not None:
        if explicit.world != world:
            raise ValueError(f"the team given to enable() has {explicit.world} ranks, the Ulysses group {world}")
        return explicit
    key = id(group)
    entry = _teams.get(key)
    if entry is None or entry[0] is not group:
        from .team import Team
        try:
            team = Team.from_process_group(group)
        except ValueError as e:      # topology (hosts, shared GPUs, > 8 ranks): identical on every rank
            team = e
        entry = (group, team)
        _teams[key] = entry
    team = entry[1]
    if isinstance(team, Exception):
        raise ValueError(str(team))
    if team.world != world:
        raise ValueError(f"team over the group has {team.world} ranks, the Ulysses degree is {world}")
    return team


def _rejectable(e):
    """Argument errors that xstage raises before any kernel or communication starts."""
    from . import attention as _attn
    if isinstance(e, ValueError):
        return True
    return isinstance(e, _attn.XstageError) and e.code in (_attn.ERR_INVALID, _attn.ERR_UNSUPPORTED)


def _native(kwargs):
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
    fn = _AttentionBackendRegistry._backends[AttentionBackendName.NATIVE]
    return fn(**kwargs)


def _xstage_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                      scale=None, enable_gqa: bool = False, return_lse: bool = False, _parallel_config=None):
    """The diffusers backend: (B, S, H, D) q/k/v in, (B, S, H, D) out."""
    import torch
    kwargs = dict(query=query, key=key, value=value, attn_mask=attn_mask, dropout_p=dropout_p,
                  is_causal=is_causal, scale=scale, enable_gqa=enable_gqa, return_lse=return_lse,
                  _parallel_config=_parallel_config)
    d = decide(describe(**kwargs))
    if d.path == "native":
        _count("native", d.reason, d.detail)
        return _native(kwargs)

    from . import attention as _attn
    try:
        _attn._load()
    except OSError as e:
        _count("native", "library", str(e))
        return _native(kwargs)

    if d.path == "flash":
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (query, key, value))
        try:
            out = _attn.flash_attn_fwd(q, k, v, softmax_scale=scale)
        except Exception as e:
            if not _rejectable(e):
                raise
            _count("native", "rejected", str(e))
            return _native(kwargs)
        _count("flash")
        return out

    # Ulysses: this rank's (B, S/P, H, D) in, (B, S/P, H, D) out over the full sequence.
    try:
        from .ulysses import ulysses_attention
    except ImportError as e:
        _count("native", "ulysses_unavailable", str(e))
        return _native(kwargs)
    cp = _parallel_config.context_parallel_config
    group = cp._ulysses_mesh.get_group()
    with torch.cuda.device(query.device) if query.is_cuda else contextlib.nullcontext():
        try:
            team = _team_for(group, int(cp.ulysses_degree))
        except ValueError as e:
            _count("native", "team", str(e))
            return _native(kwargs)
        q, k, v = (t.contiguous() for t in (query, key, value))
        try:
            out = ulysses_attention(q, k, v, team, softmax_scale=scale)
        except Exception as e:
            if not _rejectable(e):
                raise
            _count("native", "rejected", str(e))
            return _native(kwargs)
    _count("ulysses")
    return out.clone() if _opts["copy_output"] else out


# ---------------------------------------------------------------------------------------------------------
# Registration.

def _add_enum_member(enum_cls, name, value):
    """Adds a member to an existing (str) Enum: lookup by value, __members__ and attribute access."""
    if value in enum_cls._value2member_map_:
        return enum_cls._value2member_map_[value]
    member = str.__new__(enum_cls, value) if issubclass(enum_cls, str) else object.__new__(enum_cls)
    member._name_, member._value_ = name, value
    member.__objclass__ = enum_cls
    member._sort_order_ = len(enum_cls._member_names_)
    if hasattr(enum_cls, "_add_member_"):          # Python >= 3.13 (attribute and _member_map_ only)
        enum_cls._add_member_(name, member)
    else:
        type.__setattr__(enum_cls, name, member)
        enum_cls._member_map_[name] = member
    enum_cls._member_names_.append(name)
    enum_cls._value2member_map_[value] = member
    return member


def is_registered() -> bool:
    return _member is not None


def register():
    """Registers "xstage" with diffusers' attention dispatcher (idempotent); returns its AttentionBackendName."""
    global _member
    if _member is not None:
        return _member
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
    member = _add_enum_member(AttentionBackendName, "XSTAGE", BACKEND)
    if AttentionBackendName(BACKEND) is not member or BACKEND not in {m.value for m in AttentionBackendName}:
        raise RuntimeError("could not add 'xstage' to diffusers' AttentionBackendName")
    _AttentionBackendRegistry.register(member, constraints=[], supports_context_parallel=True)(_xstage_attention)
    _member = member
    return member


def enable(model=None, team=None, copy_output: bool | None = None, strict: bool | None = None):
    """Registers the backend and, given a diffusers model, sets it on every attention processor
    (model.set_attention_backend("xstage")). Call it BEFORE model.enable_parallelism(...), which checks
    that the backend supports context parallelism.

    team: a Team to use for the Ulysses path instead of one built from the process group (its world must
    equal the Ulysses degree). copy_output: copy the fused layer's output (a view of a double buffer) before
    returning it. strict: raise instead of falling back (also XSTAGE_DIFFUSERS_STRICT=1)."""
    member = register()
    if team is not None:
        _opts["team"] = team
    if copy_output is not None:
        _opts["copy_output"] = bool(copy_output)
    if strict is not None:
        _opts["strict"] = bool(strict)
    if model is not None:
        model.set_attention_backend(BACKEND)
    return member
