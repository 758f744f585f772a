"""CPU test (no GPU needed: every case fails in the argument parser, before CUDA is touched) of bench_moe's argument
errors: exit 2, nothing on stdout, one line "bench_moe: ..." naming the flag and the text given (they were "stoi",
"stod" or a vector range error; --tokens 4294967297 ran as 1), the probes' (stream_probe read --gb abc as 0) and
plan_bench's (--batches , ended in an uncaught std::out_of_range).
Usage: check_bench_moe_args.py BENCH_MOE STREAM_PROBE MAINLOOP_PROBE PLAN_BENCH"""
import subprocess
import sys

CASES = [  # (arguments after --out d, fragment of the error line)
    (["--rounds", "abc"], "--rounds 'abc': a whole number in 1..1000000"),
    (["--rounds", "-5"], "--rounds '-5'"),
    (["--block-s", "xyz"], "--block-s 'xyz': a number in [0.001, 3600]"),
    (["--block-s", "nan"], "--block-s 'nan'"),
    (["--warmup-s", "-1"], "--warmup-s '-1'"),
    (["--seed", "foo"], "--seed 'foo'"),
    (["--check-tokens", "99999999999"], "--check-tokens '99999999999'"),
    (["--emulated-tokens", ","], "--emulated-tokens ',': no value"),
    (["--ctas", "8,16"], "--ctas '8,16': one value"),
    (["--custom", "x:128:,:8:2"], "--custom ',': no value"),
    (["--tokens", "4294967297"], "--tokens '4294967297': a whole number in 1..2147483647"),
    (["--pair-share", "1.5"], "--pair-share '1.5': a whole number in 0..3"),
    (["--l2-cols", "128abc"], "--l2-cols '128abc'"),
    (["--l2-cols", "192"], "--l2-cols 192: 0 (auto), 128 or 256"),
    (["--frobnicate"], "unknown argument --frobnicate"),
]


PROBE_CASES = [  # (program index, arguments, fragment)
    (1, ["--gb", "abc"], "stream_probe: --gb 'abc' is not a whole number"),
    (1, ["--reps", "3x"], "stream_probe: --reps '3x' is not a whole number"),
    (1, ["--rounds", "0"], "stream_probe: need --gb >= 1, --reps >= 1, --rounds >= 1"),
    (2, ["--rounds", "two"], "mainloop_probe: --rounds 'two' is not a whole number"),
    (2, ["--ctas", "99999999999"], "mainloop_probe: --ctas '99999999999' is not a whole number"),
    (2, ["--power", "1e999"], "mainloop_probe: --power '1e999' is not a finite number"),
    (3, ["--batches", ","], "plan_bench: --batches: ',' holds no value"),
    (3, ["--calls", "5,6"], "plan_bench: --calls: '5,6' is not one positive integer"),
    (3, ["--tokens", "0"], "plan_bench: --tokens: '0' is not a positive integer"),
    (3, ["--json"], "plan_bench: --json needs a value"),
]


def main(binaries):
    failures = 0
    runs = [(binaries[0], ["--out", "d", *args], "bench_moe: ", fragment) for args, fragment in CASES]
    runs += [(binaries[b], args, "", fragment) for b, args, fragment in PROBE_CASES]
    for binary, args, prefix, fragment in runs:
        r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
        lines = r.stderr.splitlines()
        ok = (r.returncode == 2 and r.stdout == "" and len(lines) == 1 and lines[0].startswith(prefix)
              and fragment in lines[0])
        print(("ok   " if ok else "FAIL ") + " ".join(args), "->", r.returncode, repr(r.stderr.strip()))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:5]))
