"""CPU test (no GPU needed: every case fails before CUDA is touched) of bench_ulysses' argument errors: exit 2,
nothing on stdout, one line "bench_ulysses: error: ..." naming the bad value. Usage: check_bench_args.py BENCH_ULYSSES"""
import os
import subprocess
import sys

TORCHRUN_ONE = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "t"}
CASES = [  # (extra environment, arguments, fragment of the error line)
    (TORCHRUN_ONE, ["--ranks", "2"], "--ranks 2 sets emulated ranks, but torchrun started this process as rank 0 of 1"),
    ({}, ["--ranks", "0"], "--ranks: '0' is not a positive whole number"),
    ({}, ["--seq", "8K,,16K"], "--seq: empty item in '8K,,16K'"),
    ({}, ["--frobnicate"], "unknown argument --frobnicate"),
    ({}, ["--block-s", "abc"], "--block-s: 'abc' is not a number of seconds in [0.001, 3600]"),
    ({}, ["--warmup-s", "nan"], "--warmup-s: 'nan' is not a number of seconds"),
    ({}, ["--ranks", "2,4"], "--ranks: one value, got '2,4'"),
]


def main(binary):
    failures = 0
    launcher = ("SLURM_", "OMPI_", "PMIX_", "XSTAGE_RANK", "XSTAGE_WORLD", "XSTAGE_LOCAL", "XSTAGE_JOB", "XSTAGE_NCCL")
    base = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ONE and not k.startswith(launcher)}
    for env, args, fragment in CASES:
        r = subprocess.run([binary, *args], env={**base, **env}, capture_output=True, text=True, timeout=60)
        lines = r.stderr.splitlines()
        ok = (r.returncode == 2 and r.stdout == "" and len(lines) == 1 and lines[0].startswith("bench_ulysses: error: ")
              and fragment in lines[0])
        print(("ok   " if ok else "FAIL ") + " ".join(args), "->", r.returncode, repr(r.stderr.strip()))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
