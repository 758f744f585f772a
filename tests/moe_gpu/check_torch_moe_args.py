"""CPU test (no torch, no GPU: every case fails in argument parsing, before torch is imported) of
bench/moe/torch_moe.py's argument errors: exit 2, nothing on stdout, the last stderr line naming the bad value."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "moe" / "torch_moe.py"
CASES = [  # (arguments, fragment of the error line)
    (["--shapes", "qwen3-30b-a3b,nope"], "unknown shape 'nope'"),
    (["--backends", "xstage,foo"], "unknown backend 'foo'"),
    (["--tokens", "0"], "--tokens 0 must be >= 1"),
    (["--sets", "-1"], "--sets -1 must be >= 1"),
    (["--rounds", "0"], "--rounds 0 must be >= 1"),
    (["--block", "0"], "--block 0.0 must be a positive number of seconds"),
    (["--order", "sideways"], "invalid choice: 'sideways'"),
]


def main():
    failures = 0
    for args, fragment in CASES:
        r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        ok = r.returncode == 2 and r.stdout == "" and last.startswith("torch_moe.py: error: ") and fragment in last
        print(("ok   " if ok else "FAIL ") + " ".join(args), "->", r.returncode, repr(last))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
