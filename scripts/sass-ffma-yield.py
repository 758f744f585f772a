#!/usr/bin/env python3
"""Lets the warp scheduler switch warps inside long FFMA runs of sm_90 code (a post-build pass).

Why: the W8A8 consumers promote each K block's wgmma accumulators into fp32 finals with a run of
up to 64 FFMAs per thread (docs/MOE-NOTEBOOK.md, "Session 56"). ptxas marks every other FFMA of such a run with a
register-reuse flag on the scale operand and, with it, the control bit that keeps the warp from yielding
(by DeepGEMM's reading, a reused operand does not survive a warp switch). While one warpgroup promotes, the
other warpgroup's warps on the same SM sub-partitions wait for issue slots to start their next wgmma
batch. Clearing the reuse flag and that bit on the first part of the run lets the scheduler switch
after any FFMA there. The idea is DeepGEMM's (its FFMA interleaving pass); this is our own code.
Neither bit changes what an instruction computes: ptxas itself emits FFMAs with both bits clear; a
cleared reuse flag only makes the operand come from the register file again.

What it touches: unpredicated register-form FFMA (sm_90 opcode 0x223, predicate PT: the instruction's
first two bytes are 23 72) in runs of at least --min-run back-to-back 16-byte instructions, found at
any 16-byte phase of the file, so it works on a cubin, an object with an uncompressed fatbin, a
static library or an executable. In the first ceil(fraction * run) instructions of each run, an FFMA
whose high word carries reuse flags (bits 58-61) and the no-yield bit (bit 45) gets both cleared.
Nothing else changes; running the pass twice changes nothing the second time.

Usage: sass-ffma-yield.py FILE [--fraction F] [--min-run N] [--require N] [--check]
  --check    report only, write nothing
  --require  fail (exit 2) unless at least N runs are found: a build that expects the promotion runs
             must not pass silently when the code no longer has them
"""

import argparse
import math
import re
import sys

INSTR = 16
FFMA_RRR_PT = b"\x23\x72"  # opcode 0x223 (FFMA, register operands) with predicate nibble 7 (PT)
NO_YIELD = 1 << 45
REUSE = 0xF << 58


def find_runs(data, min_run):
    """Runs of consecutive FFMA instructions: list of (start offset, count)."""
    starts = sorted(m.start() for m in re.finditer(re.escape(FFMA_RRR_PT), data))
    by_phase = {}
    for s in starts:
        if s + INSTR <= len(data):
            by_phase.setdefault(s % INSTR, []).append(s)
    runs = []
    for offsets in by_phase.values():
        first = prev = offsets[0]
        for s in offsets[1:] + [None]:
            if s is not None and s == prev + INSTR:
                prev = s
                continue
            count = (prev - first) // INSTR + 1
            if count >= min_run:
                runs.append((first, count))
            if s is not None:
                first = prev = s
    return sorted(runs)


def high_word(data, off):
    return int.from_bytes(data[off + 8:off + 16], "little")


def plan(data, runs, fraction):
    """Offsets of the instructions to change, and the count of reuse-flagged ones left alone."""
    change, odd = [], 0
    for start, count in runs:
        head = math.ceil(fraction * count)
        for i in range(head):
            off = start + i * INSTR
            hi = high_word(data, off)
            if not hi & REUSE:
                continue
            if not hi & NO_YIELD:  # ptxas pairs them; anything else is not ours to guess about
                odd += 1
                continue
            change.append(off)
    return change, odd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--fraction", type=float, default=0.5,
                    help="part of each run (from its start) whose FFMAs may yield (0 < F <= 1)")
    ap.add_argument("--min-run", type=int, default=16, help="shortest FFMA run to touch (>= 2)")
    ap.add_argument("--require", type=int, default=0, help="fail unless at least this many runs are found")
    ap.add_argument("--check", action="store_true", help="report only")
    a = ap.parse_args(argv)
    if not (0.0 < a.fraction <= 1.0):
        sys.exit(f"sass-ffma-yield: --fraction {a.fraction} is not in (0, 1]")
    if a.min_run < 2:
        sys.exit(f"sass-ffma-yield: --min-run {a.min_run} is below 2")
    try:
        with open(a.file, "rb") as f:
            data = bytearray(f.read())
    except OSError as e:
        sys.exit(f"sass-ffma-yield: cannot read {a.file}: {e.strerror}")

    runs = find_runs(data, a.min_run)
    change, odd = plan(data, runs, a.fraction)
    lengths = {}
    for _, count in runs:
        lengths[count] = lengths.get(count, 0) + 1
    hist = " ".join(f"{n}x{c}" for n, c in sorted(lengths.items()))
    print(f"sass-ffma-yield: {a.file}: {len(runs)} FFMA runs of >= {a.min_run} ({hist or 'none'}); "
          f"{'would change' if a.check else 'changed'} {len(change)} FFMAs (fraction {a.fraction:g})"
          + (f"; {odd} reuse-flagged FFMAs without the no-yield bit left alone" if odd else ""))
    if len(runs) < a.require:
        print(f"sass-ffma-yield: {a.file}: {len(runs)} runs found, {a.require} required", file=sys.stderr)
        return 2
    if a.check or not change:
        return 0
    for off in change:
        hi = high_word(data, off) & ~(REUSE | NO_YIELD)
        data[off + 8:off + 16] = hi.to_bytes(8, "little")
    with open(a.file, "r+b") as f:  # same size: rewrite in place, no temporary beside a build output
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
