#!/usr/bin/env python3
"""CPU test of scripts/sass-ffma-yield.py on the fused MoE kernels' real object code (no GPU needed).

Checked here, each with its own code rather than the pass's:
  - the kernels' object holds the W8A8 promotion runs the pass is for (at least 8 runs of 16+ FFMAs);
  - the pass changes nothing but bit 45 and bits 58-61 of the high word of unpredicated register FFMAs,
    and only clears bits that were set;
  - with fraction 1, no FFMA left in a run of 16+ carries a reuse flag; a second pass changes nothing;
    fraction 0.5 changes fewer FFMAs, but some;
  - an object without such runs (the host code) is left byte-identical;
  - bad arguments fail with a message that names the value, and write nothing.
Usage: check_sass_ffma_yield.py "<object>;<object>;..." (CMake's $<TARGET_OBJECTS:xstage_moe_kernel>)
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "sass-ffma-yield.py")
ALLOWED = (1 << 45) | (0xF << 58)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def changed_count(out):
    m = re.search(r"(?:changed|would change) (\d+) FFMAs", out)
    return int(m.group(1)) if m else -1


def runs_count(out):
    m = re.search(r": (\d+) FFMA runs", out)
    return int(m.group(1)) if m else -1


def is_ffma(data, s):
    return 0 <= s and s + 16 <= len(data) and data[s] == 0x23 and data[s + 1] == 0x72


def reuse_flagged_in_runs(data):
    """FFMAs with a reuse flag inside runs of 16+ consecutive FFMAs, over every 16-byte phase."""
    n = 0
    for phase in range(16):
        run = []
        for s in range(phase, len(data) - 15, 16):
            if is_ffma(data, s):
                run.append(s)
                continue
            if len(run) >= 16:
                n += sum(1 for x in run if int.from_bytes(data[x + 8:x + 16], "little") >> 58 & 0xF)
            run = []
    return n


def main():
    objects = [o for o in sys.argv[1].split(";") if o]
    blobs = {o: open(o, "rb").read() for o in objects}
    kernel = [o for o in objects if "moe_launch" in os.path.basename(o)]
    host = [o for o in objects if "moe_layer" in os.path.basename(o)]
    expect(len(kernel) == 1 and len(host) == 1, f"objects moe_launch and moe_layer among {objects}")
    if failures:
        return 1
    tmp = tempfile.mkdtemp()
    try:
        orig = blobs[kernel[0]]
        a = os.path.join(tmp, "a.o")
        shutil.copy(kernel[0], a)
        rc, out = run(a, "--check", "--fraction", "1")
        print(out.strip())
        expect(rc == 0 and runs_count(out) >= 8, f"at least 8 FFMA runs in the kernels' object (got: {out.strip()})")
        expect(open(a, "rb").read() == orig, "--check writes nothing")
        would = changed_count(out)

        rc, out = run(a, "--fraction", "1")
        full = changed_count(out)
        expect(rc == 0 and full == would and full > 0, f"fraction 1 changes what --check announced ({out.strip()})")
        new = open(a, "rb").read()
        expect(len(new) == len(orig), "same size")
        starts = set()
        for i in (i for i in range(len(orig)) if orig[i] != new[i]):
            # The instruction whose control byte i is: an FFMA inside a run (a lone "23 72" two bytes into an
            # instruction can look like one's start; its neighbours 16 bytes away do not).
            s = next((s for s in (i - 13, i - 15)
                      if is_ffma(orig, s) and (is_ffma(orig, s - 16) or is_ffma(orig, s + 16))), None)
            if s is None:
                expect(False, f"byte {i} changed outside an FFMA's control bytes")
                break
            starts.add(s)
        for s in starts:
            hi0 = int.from_bytes(orig[s + 8:s + 16], "little")
            hi1 = int.from_bytes(new[s + 8:s + 16], "little")
            if (hi0 ^ hi1) & ~ALLOWED or hi1 & ~hi0 or orig[s:s + 8] != new[s:s + 8]:
                expect(False, f"instruction at {s}: {hi0:#018x} -> {hi1:#018x} is more than clearing bits 45, 58-61")
                break
        expect(len(starts) == full, f"{len(starts)} instructions differ, the pass reported {full}")
        expect(reuse_flagged_in_runs(orig) >= full and reuse_flagged_in_runs(new) == 0,
               "after fraction 1 no FFMA in a run of 16+ carries a reuse flag")

        rc, out = run(a, "--fraction", "1")
        expect(rc == 0 and changed_count(out) == 0 and open(a, "rb").read() == new, "a second pass changes nothing")

        b = os.path.join(tmp, "b.o")
        shutil.copy(kernel[0], b)
        rc, out = run(b, "--fraction", "0.5")
        half = changed_count(out)
        expect(rc == 0 and 0 < half < full, f"fraction 0.5 changes fewer FFMAs than 1, but some ({half} of {full})")

        h = os.path.join(tmp, "h.o")
        shutil.copy(host[0], h)
        rc, out = run(h, "--fraction", "1")
        expect(rc == 0 and runs_count(out) == 0 and open(h, "rb").read() == blobs[host[0]],
               f"host object untouched ({out.strip()})")

        c = os.path.join(tmp, "c.o")
        shutil.copy(kernel[0], c)
        for args, needle, code in ((["--fraction", "0"], "--fraction 0.0 is not in (0, 1]", 1),
                                   (["--fraction", "1.5"], "--fraction 1.5 is not in (0, 1]", 1),
                                   (["--min-run", "1"], "--min-run 1 is below 2", 1),
                                   (["--require", "100000"], "100000 required", 2)):
            rc, out = run(c, *args)
            expect(rc == code and needle in out, f"{args}: exit {code} naming the value (got {rc}: {out.strip()})")
        expect(open(c, "rb").read() == orig, "failed runs write nothing")
        rc, out = run(os.path.join(tmp, "missing.o"))
        expect(rc != 0 and "missing.o" in out, f"a missing file is named ({out.strip()})")
    finally:
        shutil.rmtree(tmp)
    print("sass-ffma-yield checks:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
