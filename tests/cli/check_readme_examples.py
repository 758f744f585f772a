#!/usr/bin/env python3
"""The README's model-CLI examples are real output: each is run again and its shown lines must appear, in order and
contiguous, in what the command prints now ("..." in a shown block skips any number of lines). Two forms:
  - a block of `$ xstage ...` lines (a trailing backslash continues one), each followed by its output lines;
  - a paragraph line that starts with `xstage ...` in backquotes, followed (after its paragraph) by an indented
    block: that block is part of the command's output.
Only commands that need no GPU are run (`platform`, `eval`, `design`, `simulate`, `fit`, and `calibrate --refit` without
`-o`); others are skipped."""
import re
import shlex
import subprocess
import sys

xstage, readme, root = sys.argv[1], sys.argv[2], sys.argv[3]
CPU_COMMANDS = ("platform", "eval", "design", "simulate", "fit")
lines = open(readme, encoding="utf-8").read().split("\n")


def run(cmd):
    words = cmd.split("|")[0].split()
    refit = len(words) > 2 and words[1] == "calibrate" and "--refit" in words and "-o" not in words  # reads a CSV
    if len(words) < 2 or words[0] != "xstage" or (words[1] not in CPU_COMMANDS and not refit):
        return None
    shell = re.sub(r"^xstage\b", shlex.quote(xstage), cmd.strip())
    r = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, cwd=root, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"`{cmd}` exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return [l.rstrip() for l in r.stdout.split("\n")]


def matches(shown, actual):
    """shown's lines contiguous in actual, '...' matching any run of lines: (True, None), or (False, the part missing)."""
    parts, cur = [], []
    for l in shown:
        if l.strip() == "...":
            parts.append(cur)
            cur = []
        else:
            cur.append(l)
    parts.append(cur)
    pos = 0
    for part in parts:
        if not part:
            continue
        found = -1
        for s in range(pos, len(actual) - len(part) + 1):
            if actual[s:s + len(part)] == part:
                found = s
                break
        if found < 0:
            return False, part
        pos = found + len(part)
    return True, None


def differs(i, cmd, part, actual):
    return (f"README line {i + 1}: `{cmd}`: these shown lines are not in its output now:\n  " + "\n  ".join(part)
            + "\n-- output now:\n  " + "\n  ".join(actual))


def block_at(i):
    """The indented block starting at line i: its lines (indent removed) and the index past it."""
    out = []
    while i < len(lines) and (lines[i].startswith("    ") or (lines[i] == "" and i + 1 < len(lines)
                                                            and lines[i + 1].startswith("    ") and out)):
        out.append(lines[i][4:].rstrip())
        i += 1
    return out, i


checked, failures, i = 0, [], 0
while i < len(lines):
    line = lines[i]
    if line.startswith("    $ xstage"):
        block, end = block_at(i)
        j = 0
        while j < len(block):
            if not block[j].startswith("$ "):
                j += 1
                continue
            cmd = block[j][2:]
            while cmd.endswith("\\"):
                j += 1
                cmd = cmd[:-1] + " " + block[j].strip()
            j += 1
            shown = []
            while j < len(block) and not block[j].startswith("$ "):
                shown.append(block[j])
                j += 1
            while shown and shown[-1] == "":
                shown.pop()
            actual = run(cmd)
            if actual is None:
                continue
            checked += 1
            ok, part = matches(shown, actual)
            if not ok:
                failures.append(differs(i, cmd, part, actual))
        i = end
        continue
    m = re.match(r"^`(xstage [^`]+)`", line)
    if m:
        k = i
        while k < len(lines) and lines[k] != "":  # the rest of the paragraph
            k += 1
        if k + 1 < len(lines) and lines[k + 1].startswith("    ") and not lines[k + 1].startswith("    $"):
            block, end = block_at(k + 1)
            actual = run(m.group(1))
            if actual is not None:
                checked += 1
                ok, part = matches(block, actual)
                if not ok:
                    failures.append(differs(i, m.group(1), part, actual))
            i = end
            continue
    i += 1
print(f"{checked} README examples run, {len(failures)} differ")
for f in failures:
    print("DIFFERS", f)
sys.exit(1 if failures or checked == 0 else 0)
