"""CPU test (no torch, no GPU): python/xstage/moe.py's ctypes signatures of xstage/moe.h load and reach the library's
argument checks (a null team, a null layer, pack_int4's shape errors come back as XstageError naming the value), and
the formats it offers are moe.h's (an unknown one, e.g. the removed "w8a8-packed", is a ValueError naming it).
Exits non-zero on failure."""
import ctypes
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from xstage import moe  # noqa: E402
from xstage import team as xteam  # noqa: E402
from xstage.attention import ERR_INVALID, XstageError  # noqa: E402

failures = []


def expect(what, fn, fragment):
    try:
        fn()
    except XstageError as e:
        if e.code != ERR_INVALID or fragment not in str(e):
            failures.append(f"{what}: expected ERR_INVALID with '{fragment}', got {e}")
        return
    failures.append(f"{what}: no error")


lib = moe._lib()
h = ctypes.c_void_p(1)
expect("create, null team", lambda: xteam._ok(lib.xstage_moe_create(None, 256, 256, 8, 2, 64, moe.FORMATS["w8a8"],
                                                                    ctypes.byref(h))), "team is null")
if h.value is not None:
    failures.append(f"a failed create left the handle at {h.value}")
arr = ctypes.c_void_p * 1
idx = (ctypes.c_int32 * 2)(0, 1)
expect("forward, null layer", lambda: xteam._ok(lib.xstage_moe_forward(None, None, idx, arr(1), None, arr(1), arr(1), 1, None,
                                                                       1, None, moe.ORDERS["interleaved"], None)),
       "layer is null")
expect("forward_device, null layer",
       lambda: xteam._ok(lib.xstage_moe_forward_device(None, None, arr(1), arr(1), None, arr(1), arr(1), 1, None, 1, None,
                                                       moe.ORDERS["interleaved"], None)),
       "layer is null")
expect("check, null layer", lambda: xteam._ok(lib.xstage_moe_check(None, None, b"x")), "layer is null")
o, d = ctypes.c_int(), ctypes.c_int()
expect("auto_order, null layer", lambda: xteam._ok(lib.xstage_moe_auto_order(None, 0, 0, None, ctypes.byref(o),
                                                                             ctypes.byref(d), None, 0)),
       "layer is null")
expect("pack_int4, rows 60", lambda: xteam._ok(lib.xstage_moe_pack_int4(1, 1, 2, 60, 128, None)), "60 x 128")
# the formats on offer are moe.h's format enum; the tile-packed W8A8 layout (sessions 68-69) is gone, and asking for
# it names the value and what there is
header = (Path(__file__).resolve().parents[2] / "include" / "xstage" / "moe.h").read_text()
enum = next((ln for ln in header.splitlines() if ln.startswith("enum { XSTAGE_MOE_W8A8")), "")
c_formats = {m[0].lower().replace("_", "-"): int(m[1]) for m in re.findall(r"XSTAGE_MOE_(\w+) = (\d+)", enum)}
if not c_formats or moe.FORMATS != c_formats:
    failures.append(f"FORMATS {moe.FORMATS} differ from xstage/moe.h's format enum {c_formats}")
try:
    moe._format("w8a8-packed")
    failures.append("format 'w8a8-packed': no error")
except ValueError as e:
    if "'w8a8-packed'" not in str(e) or str(sorted(c_formats)) not in str(e):
        failures.append(f"format 'w8a8-packed': expected the value and the formats named, got {e}")
for f in failures:
    print("FAIL:", f)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
