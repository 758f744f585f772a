#!/usr/bin/env python3
"""The per-tile trace of the fused MoE kernel costs nothing when it is off (issue 12): the untraced
instantiations contain no trace code. Checked on the PTX of src/kernels/moe/moe_launch.cu (built by CMake):
every untraced moe_fused_kernel entry reads %clock64 zero times (the trace's cycle spans are its only use), and
reads %globaltimer only at the named-timeout sites that every instantiation has; the traced entries read both.
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
        m = re.search(r"MoeWeightFormatE(\d)ELb([01])E", name)
        if not m:
            print(f"unrecognised entry {name}")
            return 1
        sched = "wave" if "ExpertWave" in name else "interleaved"
        found[(sched, int(m.group(1)), m.group(2) == "1")] = (body.count("%clock64"), body.count("%globaltimer"))
    expected = {(s, f, False) for s in ("wave", "interleaved") for f in (0, 1, 2)} | {
        (s, 0, True) for s in ("wave", "interleaved")}
    if set(found) != expected:
        print(f"instantiations: expected {sorted(expected)}, found {sorted(found)}")
        return 1
    bad = 0
    for key in sorted(found):
        clk, gt = found[key]
        sched, fmt, traced = key
        print(f"{sched:11s} format {fmt} trace {int(traced)}: %clock64 x{clk}, %globaltimer x{gt}")
        if not traced and clk != 0:
            print("  FAIL: an untraced kernel reads %clock64")
            bad += 1
        if traced and clk == 0:
            print("  FAIL: the traced kernel reads no %clock64 (is the trace compiled at all?)")
            bad += 1
    for s in ("wave", "interleaved"):
        off, on = found[(s, 0, False)][1], found[(s, 0, True)][1]
        if off >= on:
            print(f"  FAIL: {s}: untraced W8A8 reads %globaltimer {off}x, traced {on}x (expected fewer)")
            bad += 1
    print(f"{len(found) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
