"""CPU test (no torch, no GPU): the ctypes mirror of xstage_attn_fwd_params in python/xstage/attention.py
matches the C struct, checked end to end through xstage_attn_fwd_check. A field at a wrong offset would
make valid parameters fail or the error messages name the wrong values. Exits non-zero on failure."""
import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from xstage import attention as xa  # noqa: E402


def valid():
    p = xa.Params()
    p.q, p.k, p.v, p.o, p.lse = 0x10000000, 0x20000000, 0x30000000, 0x40000000, 0x50000000
    p.batch, p.seqlen_q, p.seqlen_kv, p.heads, p.head_dim = 2, 1000, 777, 12, 128
    p.q_stride[:] = p.o_stride[:] = [1000 * 12 * 128, 12 * 128, 128]
    p.k_stride[:] = p.v_stride[:] = [777 * 12 * 128, 12 * 128, 128]
    p.softmax_scale, p.causal, p.dtype = 0.0, 0, xa.DTYPE_BF16
    return p


failures = []


def expect(params, code, fragment):
    rc = xa.check(params)
    msg = xa.last_error()
    if rc != code or fragment not in msg:
        failures.append(f"expected code {code} with '{fragment}', got {rc}: '{msg}'")


# The struct's size and the offsets of its last fields, as a C compiler lays them out on LP64.
if ctypes.sizeof(xa.Params) != 176 or xa.Params.dtype.offset != 168 or xa.Params.q_stride.offset != 64:
    failures.append(f"Params layout: size {ctypes.sizeof(xa.Params)}, q_stride at {xa.Params.q_stride.offset}, "
                    f"dtype at {xa.Params.dtype.offset} (expected 176, 64, 168)")
expect(valid(), xa.OK, "")
for field, value, code, fragment in [
    ("batch", 0, xa.ERR_INVALID, "batch = 0"),
    ("seqlen_q", -3, xa.ERR_INVALID, "seqlen_q = -3"),
    ("seqlen_kv", 0, xa.ERR_INVALID, "seqlen_kv = 0"),
    ("heads", 0, xa.ERR_INVALID, "heads = 0"),
    ("head_dim", 96, xa.ERR_UNSUPPORTED, "head_dim = 96 is not supported (64 or 128)"),
    ("dtype", 5, xa.ERR_INVALID, "dtype = 5"),
    ("causal", 3, xa.ERR_INVALID, "causal = 3"),
    ("softmax_scale", float("nan"), xa.ERR_INVALID, "softmax_scale = nan"),
    ("o", 0x40000008, xa.ERR_INVALID, "not 16-byte aligned"),
    ("lse", 0x50000002, xa.ERR_INVALID, "lse"),
]:
    p = valid()
    setattr(p, field, value)
    expect(p, code, fragment)
for field in ("q_stride", "k_stride", "v_stride", "o_stride"):
    for i, name in enumerate(("batch", "seq", "head")):
        p = valid()
        getattr(p, field)[i] = 12
        expect(p, xa.ERR_INVALID, f"{field[0]}_stride[{i}] ({name}) = 12")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"python ABI: ok ({xa.library_path()})")
