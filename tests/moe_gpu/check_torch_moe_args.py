"""CPU test (no torch, no GPU: every case fails in argument parsing, before torch is imported) of
bench/moe/torch_moe.py's and torch_moe_ep.py's argument errors: exit 2, nothing on stdout, the last stderr line naming
the bad value; and --order's choices equal to xstage.moe.ORDERS and "auto"."""
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "moe"
CASES = [  # (script, arguments, fragment of the error line)
    ("torch_moe.py", ["--shapes", "qwen3-30b-a3b,nope"], "unknown shape 'nope'"),
    ("torch_moe.py", ["--backends", "xstage,foo"], "unknown backend 'foo'"),
    ("torch_moe.py", ["--tokens", "0"], "--tokens 0 must be >= 1"),
    ("torch_moe.py", ["--sets", "-1"], "--sets -1 must be >= 1"),
    ("torch_moe.py", ["--rounds", "0"], "--rounds 0 must be >= 1"),
    ("torch_moe.py", ["--block", "0"], "--block 0.0 must be a positive number of seconds"),
    ("torch_moe.py", ["--order", "sideways"], "invalid choice: 'sideways'"),
    ("torch_moe_ep.py", ["--shapes", "nope"], "unknown shape 'nope'"),
    ("torch_moe_ep.py", ["--backends", "xstage,torch-bf16,foo"], "unknown backend 'foo'"),
    ("torch_moe_ep.py", ["--tokens", "0"], "--tokens 0 must be >= 1"),
    ("torch_moe_ep.py", ["--order", "sideways"], "invalid choice: 'sideways'"),
    ("torch_moe_ep.py", [], "run it under torchrun"),
]


def main():
    failures = 0
    # --order's choices are the library's orders and "auto", written out in torch_moe.py (no import at parse time)
    sys.path.insert(0, str(BENCH))
    sys.path.insert(0, str(BENCH.parents[1] / "python"))
    import torch_moe
    from xstage import moe
    if sorted(torch_moe.ORDER_CHOICES) != sorted([*moe.ORDERS, "auto"]):
        print("FAIL torch_moe.ORDER_CHOICES", torch_moe.ORDER_CHOICES, "!= xstage.moe.ORDERS + auto", list(moe.ORDERS))
        failures += 1
    for script, args, fragment in CASES:
        env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}  # not under torchrun
        r = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=60,
                           env=env)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        ok = r.returncode == 2 and r.stdout == "" and last.startswith(f"{script}: error: ") and fragment in last
        print(("ok   " if ok else "FAIL ") + script + " " + " ".join(args), "->", r.returncode, repr(last))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
