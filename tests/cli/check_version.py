#!/usr/bin/env python3
"""`xstage --version` names this build: its first line is "xstage <project(VERSION)> (git <revision>)", the revision
being the commit it was built from (12 hex digits, "+dirty" with uncommitted tracked changes): this checkout's HEAD or
an ancestor of it ("unknown" outside a git checkout); a CUDA build adds the CUDA and NCCL versions it was built with
and loaded; the Python package's __version__ is the same project version.

usage: check_version.py XSTAGE_BIN SOURCE_DIR CUDA(0|1)
"""
import re
import subprocess
import sys
from pathlib import Path


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    exe, src, cuda = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
    m = re.search(r"project\(xstage\s+LANGUAGES\s+CXX\s+VERSION\s+(\d+\.\d+\.\d+)\)", (src / "CMakeLists.txt").read_text())
    assert m, "CMakeLists.txt: no project(xstage ... VERSION x.y.z)"
    version = m.group(1)
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"xstage --version: exit {r.returncode}: {r.stderr}"
    assert r.stderr == "", f"xstage --version wrote to stderr: {r.stderr!r}"
    lines = r.stdout.splitlines()
    m = re.fullmatch(rf"xstage {re.escape(version)} \(git ([0-9a-f]{{12}}(\+dirty)?|unknown)\)", lines[0])
    assert m, f"first line {lines[0]!r}, want 'xstage {version} (git <12 hex digits>[+dirty])'"
    rev = m.group(1).split("+")[0]
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        # HEAD or an ancestor: a binary built before the last commit and not rebuilt since (ctest does not rebuild)
        # names the commit it came from.
        assert rev != "unknown", "built in a git checkout, yet the revision is unknown"
        anc = subprocess.run(["git", "-C", str(src), "merge-base", "--is-ancestor", rev, "HEAD"], capture_output=True)
        assert anc.returncode == 0, f"revision {rev} is neither HEAD ({head.stdout.strip()[:12]}) nor an ancestor of it"
    else:
        assert rev == "unknown", f"no git checkout at {src}, yet the build names revision {rev}"
    v = r"(\d+\.\d+(\.\d+)?|none)"
    if cuda:
        assert len(lines) == 3, lines
        assert re.fullmatch(r"built with CUDA \d+\.\d+ and NCCL \d+\.\d+\.\d+", lines[1]), lines[1]
        assert re.fullmatch(rf"running CUDA runtime {v}, driver (for CUDA {v}|none), NCCL {v}", lines[2]), lines[2]
    else:
        assert lines[1:] == ["built without CUDA (the model, simulator and calibrate --refit only)"], lines
    sys.path.insert(0, str(src / "python"))
    import xstage  # noqa: E402  (the package imports without torch or a GPU)
    assert xstage.__version__ == version, f"python/xstage/__init__.py __version__ {xstage.__version__!r} != {version}"
    # --version is an option of the top level only; a subcommand's unknown flag is still an error (exit 2).
    r = subprocess.run([exe, "platform", "list", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, f"xstage platform list --version: exit {r.returncode}"
    print(f"ok: {lines[0]}" + (f"; {lines[1]}; {lines[2]}" if cuda else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
