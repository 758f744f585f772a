"""CPU test (no GPU: --help and a bad flag end the programs before any CUDA call) of the benchmarks' and probes'
usage: `PROGRAM --help` and `-h` print the source's header comment (the // lines at the top, without the marks) on
stdout and exit 0; every flag the parser compares against is in that text, and every flag the text names is one the
parser takes (or another program's, listed below); an unknown flag exits 2 with one line pointing at --help. The
Python scripts after --python answer --help with exit 0 and their usage on stdout (no torch or matplotlib needed).
Usage: check_usage.py PROGRAM SOURCE [PROGRAM SOURCE ...] [--python SCRIPT ...]"""
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "cmake"))
from usage_from_header import split_source  # noqa: E402  (the build's own rule for the usage text)

# Flags a header names that belong to another program, per program.
OTHER_PROGRAMS_FLAGS = {"barrier_probe": {"--tool"}}  # compute-sanitizer's
FLAG = r"(?<![\w-])(--[a-z][a-z0-9-]*)(?![\w-])"


def check(program, source):
    name = pathlib.Path(program).name
    header, body = split_source(source)
    problems = []
    for flag in ("--help", "-h"):
        r = subprocess.run([program, flag], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or r.stderr or r.stdout != header:
            problems.append(f"{flag}: rc {r.returncode}, stderr {r.stderr.strip()!r}, stdout "
                            f"{'equals' if r.stdout == header else 'differs from'} the header "
                            f"({len(r.stdout)} against {len(header)} characters)")
    parsed = set(re.findall(r'== "(--[a-z][a-z0-9-]*)"', body))
    named = set(re.findall(FLAG, header))
    if not parsed and name != "barrier_probe":
        problems.append("no flag found in the parser (its comparisons are k == \"--flag\")")
    for flag in sorted(parsed - named):
        problems.append(f"the parser takes {flag}, the usage does not name it")
    for flag in sorted(named - parsed - {"--help"} - OTHER_PROGRAMS_FLAGS.get(name, set())):
        problems.append(f"the usage names {flag}, the parser does not take it")
    bad = "no-such-mode" if name == "barrier_probe" else "--no-such-flag"
    r = subprocess.run([program, bad], capture_output=True, text=True, timeout=60)
    lines = r.stderr.splitlines()
    if r.returncode != 2 or len(lines) != 1 or bad not in lines[0] or "--help" not in lines[0]:
        problems.append(f"{bad}: rc {r.returncode}, stderr {r.stderr.strip()!r} (want 2 and one line naming it and --help)")
    print(("ok   " if not problems else "FAIL ") + f"{name}: {len(parsed)} flags, usage {len(header.splitlines())} lines")
    for p in problems:
        print("     " + p)
    return not problems


def check_python(script):
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
    ok = r.returncode == 0 and not r.stderr and len(r.stdout.strip().splitlines()) >= 2
    print(("ok   " if ok else "FAIL ") + f"{pathlib.Path(script).name} --help: rc {r.returncode}, "
          f"{len(r.stdout.splitlines())} lines" + ("" if ok else f", stderr {r.stderr.strip()[-300:]!r}"))
    return ok


def main(args):
    scripts = args[args.index("--python") + 1:] if "--python" in args else []
    programs = args[:args.index("--python")] if "--python" in args else args
    if len(programs) < 2 or len(programs) % 2:
        sys.exit(__doc__)
    results = [check(programs[i], programs[i + 1]) for i in range(0, len(programs), 2)]
    results += [check_python(s) for s in scripts]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
