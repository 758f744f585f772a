#!/usr/bin/env python3
"""`xstage --version` names this build: its first line is "xstage <project(VERSION)> (git <revision>)", the revision
being the source tree's HEAD (12 hex digits, "+dirty" with uncommitted tracked changes; "unknown" outside a git
checkout); a CUDA build adds the CUDA and NCCL versions it was built with and loaded; the Python package's
__version__ is the same project version.

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
    git = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if git.returncode == 0:
        rev = git.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        revs = {rev + "+dirty"} if dirty else {rev}
    else:
        revs = {"unknown"}
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"xstage --version: exit {r.returncode}: {r.stderr}"
    assert r.stderr == "", f"xstage --version wrote to stderr: {r.stderr!r}"
    lines = r.stdout.splitlines()
    want = {f"xstage {version} (git {x})" for x in revs}
    # The binary's revision is the tree's when it was built; a tree edited since reads "+dirty" here only.
    assert lines[0] in want or lines[0] == f"xstage {version} (git {next(iter(revs)).split('+')[0]}+dirty)", \
        f"first line {lines[0]!r}, want one of {sorted(want)} (rebuild after a commit?)"
    v = r"(\d+\.\d+(\.\d+)?|none)"
    if cuda:
        assert len(lines) == 3, lines
        assert re.fullmatch(rf"built with CUDA \d+\.\d+ and NCCL \d+\.\d+\.\d+", lines[1]), lines[1]
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
