#!/usr/bin/env python3
"""The per-tile trace of the fused MoE kernel costs nothing when it is off (issue 12): the untraced
instantiations contain no trace code. Checked on the PTX of src/kernels/moe/moe_launch.cu (built by CMake):
every untraced moe_fused_kernel entry reads %clock64 zero times (the trace's cycle spans are its only use), and
reads %globaltimer only at the named-timeout sites that every instantiation has; the traced entries read both.
Each entry is keyed by scheduler, weight format, trace and lean (the kernel's template arguments <Sched, kFormat,
kTrace, kLean>), so the lean kernels the library launches by default are checked as well as the full ones.
Usage: check_trace_off.py FILE.ptx"""
import re
import sys


def entries(ptx):
    for part in re.split(r"\n(?=(?:\.visible )?\.entry )", ptx):
        m = re.match(r"(?:\.visible )?\.entry (\S+)\(", part)
        if m and "moe_fused_kernel" in m.group(1):
            yield m.group(1), part


def main():
    ptx = open(sys.argv[1]).read()
    found = {}
    for name, body in entries(ptx):
        m = re.search(r"MoeWeightFormatE(\d)ELb([01])ELb([01])E", name)
        if not m:
            print(f"unrecognised entry {name}")
            return 1
        sched = "wave" if "ExpertWave" in name else "interleaved"
        key = (sched, int(m.group(1)), m.group(2) == "1", m.group(3) == "1")
        if key in found:
            print(f"entry {name} repeats the key {key}")
            return 1
        found[key] = (body.count("%clock64"), body.count("%globaltimer"))
    # (scheduler, format, trace, lean): every format untraced and full; W8A8 traced; W8A8 and W4A8 lean
    expected = {(s, f, False, False) for s in ("wave", "interleaved") for f in (0, 1, 2)} | {
        (s, 0, True, False) for s in ("wave", "interleaved")} | {
        (s, f, False, True) for s in ("wave", "interleaved") for f in (0, 1)}
    if set(found) != expected:
        print(f"instantiations: expected {sorted(expected)}, found {sorted(found)}")
        return 1
    bad = 0
    for key in sorted(found):
        clk, gt = found[key]
        sched, fmt, traced, lean = key
        print(f"{sched:11s} format {fmt} trace {int(traced)} lean {int(lean)}: %clock64 x{clk}, %globaltimer x{gt}")
        if not traced and clk != 0:
            print("  FAIL: an untraced kernel reads %clock64")
            bad += 1
        if traced and clk == 0:
            print("  FAIL: the traced kernel reads no %clock64 (is the trace compiled at all?)")
            bad += 1
    for s in ("wave", "interleaved"):
        on = found[(s, 0, True, False)][1]
        for lean in (False, True):
            off = found[(s, 0, False, lean)][1]
            if off >= on:
                print(f"  FAIL: {s}: untraced W8A8 (lean {int(lean)}) reads %globaltimer {off}x, traced {on}x "
                      "(expected fewer)")
                bad += 1
    print(f"{len(found) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
