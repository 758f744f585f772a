"""CPU test (no torch needed: every case fails before torch is imported) of bench/ulysses/torch_baseline.py's argument
errors: exit status 1 (SystemExit with a message), one line "torch_baseline: ..." naming the value, no traceback (they
were a ValueError traceback for --seq abc, and --emulate -2 was reported as a divisibility error).
Usage: check_torch_baseline_args.py TORCH_BASELINE_PY"""
import subprocess
import sys

CASES = [  # (arguments, fragment of the error line)
    (["--seq", "abc"], "'abc' in 'abc' is not a positive whole number"),
    (["--seq", "8K,1.5K"], "'1.5K' in '8K,1.5K'"),
    (["--seq", "0"], "'0' in '0'"),
    (["--heads-per-rank", "3,,6"], "empty item in '3,,6'"),
    (["--emulate", "-2"], "--emulate -2: the number of emulated ranks must be >= 1"),
    (["--block-s", "nan"], "--block-s nan"),
    (["--rounds", "0"], "--rounds 0: must be >= 1"),
    (["--emulate", "3", "--seq", "8K"], "sequence length 8192 is not divisible by the world size 3"),
]


def main(script):
    failures = 0
    for args, fragment in CASES:
        r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=60)
        lines = r.stderr.strip().splitlines()
        ok = (r.returncode == 1 and len(lines) == 1 and lines[0].startswith("torch_baseline: ") and fragment in lines[0])
        print(("ok   " if ok else "FAIL ") + " ".join(args), "->", r.returncode, repr(r.stderr.strip()[-300:]))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
