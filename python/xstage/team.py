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
        if self._h and self._h.value:
            getattr(_lib(), self._destroy)(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Team(_Handle):
    """P ranks for xstage's distributed kernels. Use Team.emulated or Team.from_process_group."""
    _destroy = "xstage_team_destroy"

    def __init__(self, handle, keepalive=None):
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
        self._epoch = 0

    @classmethod
    def emulated(cls, world: int, device: int | None = None, timeout_s: float = 10.0) -> "Team":
        """`world` ranks on one GPU (default: torch's current device), each with SMs / world SMs."""
        if not isinstance(world, int) or isinstance(world, bool):
            raise ValueError(f"world must be an int, got {world!r}")
        if device is None:
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
            raw = ctypes.create_string_buffer(_ID_BYTES)
            _ok(_lib().xstage_nccl_unique_id(raw, _ID_BYTES))
            obj = [bytes(raw.raw)]
        dist.broadcast_object_list(obj, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
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

    def next_epoch(self) -> int:
        """The completion epoch of the next fused call on this team (1, 2, ...)."""
        self._epoch += 1
        return self._epoch

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

    def tensor(self, rank: int | None = None):
        r = self.team.first_rank if rank is None else rank
        ptr = _lib().xstage_buffer_ptr(self._h, r)
        if not ptr:
            raise _attn.XstageError(_attn.ERR_INVALID, _attn.last_error())
        return device_tensor(ptr, self.shape, self.dtype, owner=self)



def device_tensor(ptr: int, shape, dtype, owner=None):
    """A torch view (no copy) of `shape` x `dtype` at device address `ptr` on the current device, keeping
    `owner` (the buffer's Python handle) alive as long as the tensor lives."""
    import torch
    size = torch.empty((), dtype=dtype).element_size()
    typestr = {1: "|u1", 2: "<i2", 4: "<i4", 8: "<i8"}[size]  # raw words, then reinterpreted as dtype

    class _View:  # __cuda_array_interface__ v3: torch.as_tensor wraps it without a copy
        __cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (int(ptr), False),
                                    "version": 3, "strides": None}
    t = torch.as_tensor(_View(), device=f"cuda:{torch.cuda.current_device()}").view(dtype)
    t._xstage_owner = owner
    return t


def attn_fwd_to_peers(q, k, v, team: Team, out: SymBuffer, seq_per_rank: int, softmax_scale=None, epoch=None):
    """Attention of every rank this process serves with the Ulysses post-attention all-to-all fused into
    its epilogue. q, k, v: (local_ranks * b, S, h, d) head-partitioned inputs (rank first_rank + g owns
    batch entries [g*b, (g+1)*b)); S = world * seq_per_rank. out: team buffer of shape
    (b, seq_per_rank, world * h, d) per rank. Returns when queued; out is complete on the current stream."""
    import torch
    p = _attn.Params()
    batch, seqlen, heads, dim = q.shape
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), None, None
    p.batch, p.seqlen_q, p.seqlen_kv, p.heads, p.head_dim = batch, seqlen, k.shape[1], heads, dim
    for field, t, name in (("q_stride", q, "q"), ("k_stride", k, "k"), ("v_stride", v, "v")):
        getattr(p, field)[:] = _attn._strides(t, name)
    p.softmax_scale = float(softmax_scale) if softmax_scale else 0.0
    p.causal = 0
    p.dtype = _attn.DTYPE_BF16 if q.dtype == torch.bfloat16 else _attn.DTYPE_FP16
    if out.dtype != q.dtype or out.shape != (batch // max(team.local_ranks, 1), seq_per_rank, team.world * heads, dim):
        raise ValueError(f"out must be {q.dtype} of shape {(batch // max(team.local_ranks, 1), seq_per_rank, team.world * heads, dim)}, "
                         f"got {out.dtype} {out.shape}")
    e = team.next_epoch() if epoch is None else int(epoch)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    _ok(_lib().xstage_attn_fwd_to_peers(ctypes.byref(p), team._h, out._h, int(seq_per_rank), e,
                                        ctypes.c_void_p(stream)))
