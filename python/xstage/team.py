"""xstage teams from Python: the ranks a distributed kernel runs over, real or emulated, through the C ABI
of libxstage_attention.so (include/xstage/team.h).

    from xstage.team import Team
    team = Team.from_process_group()          # torch.distributed initialised (torchrun): one process per GPU
    team = Team.emulated(4)                   # 4 ranks on this process's GPU (correctness; no NVLink)
    buf = team.buffer((b, s, h, d), torch.bfloat16)   # symmetric: every rank holds one, kernels reach all
    out_r = buf.tensor(rank)                  # a torch view of a rank this process serves

A real team exchanges the NCCL unique id through the process group (rank 0 makes it) and checks that the
group's ranks sit on distinct GPUs of one node that can reach each other by load/store. Every number of
an emulated team is labelled (team.label) "emulated ... no NVLink". ctypes only; torch is imported when a
function that needs it is called.
"""
from __future__ import annotations

import ctypes

from . import attention as _attn

__all__ = ["Team", "SymBuffer", "attn_fwd_to_peers", "device_tensor", "MAX_RANKS"]

MAX_RANKS = 8          # runtime::kMaxRanks: one NVLink domain per peer table
_ID_BYTES = 128        # XSTAGE_NCCL_ID_BYTES


def _lib():
    lib = _attn._load()
    if not getattr(lib, "_xstage_team_ready", False):
        vp, ip, i, d = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_double
        sig = {
            "xstage_nccl_unique_id": ([ctypes.c_char_p, i], i),
            "xstage_team_create_nccl": ([i, i, i, ctypes.c_char_p, i, d, ctypes.POINTER(vp)], i),
            "xstage_team_create_emulated": ([i, i, d, ctypes.POINTER(vp)], i),
            "xstage_team_destroy": ([vp], None),
            "xstage_team_info": ([vp, ip, ip, ip, ip, ip], i),
            "xstage_team_label": ([vp, ctypes.c_char_p, i], i),
            "xstage_team_check": ([vp, vp, ctypes.c_char_p], i),
            "xstage_buffer_alloc": ([vp, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(vp)], i),
            "xstage_buffer_free": ([vp], None),
            "xstage_buffer_ptr": ([vp, i], vp),
            "xstage_attn_fwd_to_peers": ([ctypes.POINTER(_attn.Params), vp, vp, i, ctypes.c_uint32, vp], i),
        }
        for name, (args, res) in sig.items():
            f = getattr(lib, name)
            f.argtypes, f.restype = args, res
        lib._xstage_team_ready = True
    return lib


def _ok(rc):
    if rc != _attn.OK:
        raise _attn.XstageError(rc, _attn.last_error())


class _Handle:
    """Owns one library handle; `_destroy` names the C function that frees it (once, at close or collection)."""
    _destroy = ""

    def close(self):
        # In place: a team shares this c_void_p (Team._adopt), so it sees the handle gone and does not free it again.
        if self._h and self._h.value:
            getattr(_lib(), self._destroy)(self._h)
            self._h.value = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Team(_Handle):
    """P ranks for xstage's distributed kernels. Use Team.emulated or Team.from_process_group. close() (or collection)
    first closes what was made on the team (its buffers and layers, which then refuse calls), then the team: the
    library's buffers and layers must not outlive their team."""
    _destroy = "xstage_team_destroy"

    def __init__(self, handle, keepalive=None):
        # The handles of buffers and layers made on this team (_adopt), held strongly: when a team and its layers die
        # together in a reference cycle, the collector clears weak references before any finalizer runs, so a
        # WeakSet would be empty here and the layers would be freed after their team.
        self._children = []
        self._h = ctypes.c_void_p(handle)
        self._keepalive = keepalive
        self.group = None  # the torch.distributed group of a real team (from_process_group)
        self.device = None  # the CUDA device its ranks run on (set by emulated / from_process_group)
        w, f, n, e, s = (ctypes.c_int() for _ in range(5))
        _ok(_lib().xstage_team_info(self._h, *(ctypes.byref(x) for x in (w, f, n, e, s))))
        self.world, self.first_rank, self.local_ranks = w.value, f.value, n.value
        self.is_emulated, self.sms_per_rank = bool(e.value), s.value
        buf = ctypes.create_string_buffer(256)
        _ok(_lib().xstage_team_label(self._h, buf, len(buf)))
        self.label = buf.value.decode()

    def _adopt(self, dependent):
        """Registers a buffer or layer made on this team (its handle object, shared), so that close() frees it first."""
        self._children = [c for c in self._children if c[1].value] + [(dependent._destroy, dependent._h)]

    def close(self):
        for destroy, h in getattr(self, "_children", ()):
            if h.value:  # (one closed by its owner is None already)
                getattr(_lib(), destroy)(h)
                h.value = None
        self._children = []
        super().close()

    @classmethod
    def emulated(cls, world: int, device: int | None = None, timeout_s: float = 10.0) -> "Team":
        """`world` ranks on one GPU (default, or a negative device: torch's current one), each with SMs / world SMs."""
        if not isinstance(world, int) or isinstance(world, bool):
            raise ValueError(f"world must be an int, got {world!r}")
        if device is None or int(device) < 0:
            import torch
            device = torch.cuda.current_device()
        h = ctypes.c_void_p()
        _ok(_lib().xstage_team_create_emulated(world, int(device), float(timeout_s), ctypes.byref(h)))
        team = cls(h.value)
        team.device = int(device)
        return team

    @classmethod
    def from_process_group(cls, group=None, timeout_s: float = 60.0) -> "Team":
        """A real team over a torch.distributed group (default: the world): one process per GPU, each on
        torch.cuda.current_device(). The NCCL unique id travels through the group; every rank must call this."""
        import socket

        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: call dist.init_process_group first "
                               "(e.g. under torchrun)")
        world = dist.get_world_size(group)
        rank = dist.get_rank(group)
        if world > MAX_RANKS:
            raise ValueError(f"group size {world} exceeds the {MAX_RANKS} ranks one xstage team addresses")
        device = torch.cuda.current_device()
        # Every rank on its own GPU of one node: load/store peer access needs one NVLink domain.
        here = (socket.gethostname(), torch.cuda.get_device_properties(device).uuid.__str__())
        seen = [None] * world
        dist.all_gather_object(seen, here, group=group)
        hosts = {h for h, _ in seen}
        if len(hosts) != 1:
            raise ValueError(f"the group spans {len(hosts)} hosts ({sorted(hosts)}); an xstage team is one node")
        if len({u for _, u in seen}) != world:
            dup = [r for r, s in enumerate(seen) if seen.count(s) > 1]
            raise ValueError(f"ranks {dup} of the group share a GPU; an xstage team needs one GPU per rank "
                             f"(set the device with torch.cuda.set_device(local_rank))")
        obj = [None]
        if rank == 0:
            # A failure here is sent instead of the id, so every rank raises it (the others would otherwise wait in
            # the broadcast for ever).
            raw = ctypes.create_string_buffer(_ID_BYTES)
            rc = _lib().xstage_nccl_unique_id(raw, _ID_BYTES)
            obj = [bytes(raw.raw)] if rc == _attn.OK else [(rc, _attn.last_error())]
        dist.broadcast_object_list(obj, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        if isinstance(obj[0], tuple):
            raise _attn.XstageError(obj[0][0], f"rank 0 could not make the NCCL unique id: {obj[0][1]}")
        h = ctypes.c_void_p()
        _ok(_lib().xstage_team_create_nccl(rank, world, device, obj[0], _ID_BYTES, float(timeout_s), ctypes.byref(h)))
        team = cls(h.value)
        team.group = group if group is not None else dist.group.WORLD
        team.device = int(device)
        return team

    def buffer(self, shape, dtype, name: str = "buffer") -> "SymBuffer":
        """A zero-filled symmetric buffer: one tensor of `shape` and `dtype` per rank (collective when real)."""
        import torch
        numel = 1
        for n in shape:
            if int(n) <= 0:
                raise ValueError(f"buffer shape {tuple(shape)} must be positive")
            numel *= int(n)
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        h = ctypes.c_void_p()
        _ok(_lib().xstage_buffer_alloc(self._h, nbytes, name.encode(), ctypes.byref(h)))
        return SymBuffer(self, h.value, tuple(int(n) for n in shape), dtype)

    def check(self, what: str = "team work", stream=None):
        """Waits for `stream` (default: torch's current stream, where xstage's calls run) and the team's own
        work, and raises XstageError naming a device-side failure (e.g. a signal timeout: the rank, the peer
        it waited for and the slot)."""
        import torch
        s = ctypes.c_void_p((stream if stream is not None else torch.cuda.current_stream()).cuda_stream)
        _ok(_lib().xstage_team_check(self._h, s, what.encode()))

    def __repr__(self):
        return f"Team({self.label})"


class SymBuffer(_Handle):
    """A team's symmetric buffer; tensor(rank) views a copy this process serves."""
    _destroy = "xstage_buffer_free"

    def __init__(self, team: Team, handle, shape, dtype):
        self.team, self._h, self.shape, self.dtype = team, ctypes.c_void_p(handle), shape, dtype
        team._adopt(self)

    def tensor(self, rank: int | None = None):
        r = self.team.first_rank if rank is None else rank
        ptr = _lib().xstage_buffer_ptr(self._h, r)
        if not ptr:
            raise _attn.XstageError(_attn.ERR_INVALID, _attn.last_error())
        return device_tensor(ptr, self.shape, self.dtype, owner=self, device=self.team.device)


def device_tensor(ptr: int, shape, dtype, owner=None, device: int | None = None):
    """A torch view (no copy) of `shape` x `dtype` at device address `ptr` on `device` (default: the current one),
    keeping `owner` (the buffer's Python handle) alive as long as the tensor lives."""
    import torch
    size = torch.empty((), dtype=dtype).element_size()
    typestr = {1: "|u1", 2: "<i2", 4: "<i4", 8: "<i8"}[size]  # raw words, then reinterpreted as dtype

    class _View:  # __cuda_array_interface__ v3: torch.as_tensor wraps it without a copy
        __cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (int(ptr), False),
                                    "version": 3, "strides": None}
    t = torch.as_tensor(_View(), device=f"cuda:{torch.cuda.current_device() if device is None else device}").view(dtype)
    t._xstage_owner = owner
    return t


def attn_fwd_to_peers(q, k, v, team: Team, out: SymBuffer, seq_per_rank: int, softmax_scale=None, epoch=None):
    """Attention of every rank this process serves with the Ulysses post-attention all-to-all fused into
    its epilogue. q, k, v: (local_ranks * b, S, h, d) head-partitioned inputs (rank first_rank + g owns
    batch entries [g*b, (g+1)*b)); S = world * seq_per_rank; bf16 or fp16 CUDA tensors on the team's device, checked
    as flash_attn_fwd checks them (ValueError naming the bad value, before any work). out: a buffer of this team of
    shape (b, seq_per_rank, world * h, d) per rank and q's dtype. epoch: None (the library counts the team's calls;
    calls of different shapes may follow each other) or this call's number on the team (1, 2, ...; another number
    is an XstageError). Returns None once the work is queued on torch's current stream of q's device; out is complete
    on that stream."""
    import torch
    softmax_scale = _attn._check_inputs(q, k, v, softmax_scale)
    if team.device is not None and q.device != torch.device("cuda", team.device):
        raise ValueError(f"q is on {q.device}, the team's ranks on cuda:{team.device}")
    if not isinstance(out, SymBuffer) or out.team is not team:
        raise ValueError(f"out must be a buffer of this team (team.buffer(...)), got {type(out).__name__}"
                         + (" of another team" if isinstance(out, SymBuffer) else ""))
    if epoch is not None and not (isinstance(epoch, int) and 0 <= epoch < 2 ** 32):
        raise ValueError(f"epoch must be None or a whole number in 0 .. 2^32 - 1, got {epoch!r}")
    p = _attn.Params()
    batch, seqlen, heads, dim = q.shape
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), None, None
    p.batch, p.seqlen_q, p.seqlen_kv, p.heads, p.head_dim = batch, seqlen, k.shape[1], heads, dim
    for field, t, name in (("q_stride", q, "q"), ("k_stride", k, "k"), ("v_stride", v, "v")):
        getattr(p, field)[:] = _attn._strides(t, name)
    p.softmax_scale = softmax_scale
    p.causal = 0
    p.dtype = _attn.DTYPE_BF16 if q.dtype == torch.bfloat16 else _attn.DTYPE_FP16
    if out.dtype != q.dtype or out.shape != (batch // max(team.local_ranks, 1), seq_per_rank, team.world * heads, dim):
        raise ValueError(f"out must be {q.dtype} of shape {(batch // max(team.local_ranks, 1), seq_per_rank, team.world * heads, dim)}, "
                         f"got {out.dtype} {out.shape}")
    e = 0 if epoch is None else epoch  # 0: the library counts the team's calls (team.h)
    with torch.cuda.device(q.device):  # the library launches on the current device
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _ok(_lib().xstage_attn_fwd_to_peers(ctypes.byref(p), team._h, out._h, int(seq_per_rank), e,
                                            ctypes.c_void_p(stream)))
