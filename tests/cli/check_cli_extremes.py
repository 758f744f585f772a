#!/usr/bin/env python3
"""Every numeric option of the model CLI (`xstage eval`, `design ...`, `simulate moe`, `fit`) given extreme values,
one at a time: each run must end in a result (exit 0) or one error line naming the option or the value (exit 2),
within a time limit, and with nothing from the sanitizers when the binary is built with them (scripts/sanitize.sh).
Such runs found an int overflow in the MoE schedulers, a routing that filled 24 GB and a simulation that ran for
hours. An option the command's base arguments already give (`eval -B`) gets the value in place of the base one."""
import os
import re
import subprocess
import sys

xstage, fixture = sys.argv[1], sys.argv[2]
BASE = {
    "eval": ["-B", "32K"],
    "design moe-order": ["--shape", "deepseek-v4-pro"],
    "design moe-bound": ["--shape", "deepseek-v4-pro"],
    "design moe": ["--hidden", "7168", "--inter", "3072", "--experts", "384", "--topk", "6"],
    "design attention": [],
    "design paper": [],
    "simulate moe": ["--hidden", "4096", "--inter", "2048", "--experts", "256", "--topk", "6", "--tokens", "2048"],
    "fit": [fixture],
}
OPTIONS = {
    "eval": ["-K", "-B", "-G"],
    "design moe-order": ["--hidden", "--inter", "--experts", "--topk", "--tokens", "-P", "-K", "--l2", "--tile",
                         "--l1-cols", "--l2-cols", "--tflops", "--t-l1", "--t-l2", "--staging", "--min-gain", "--lead",
                         "--seed"],
    "design moe-bound": ["--hidden", "--inter", "--experts", "--topk", "--tokens", "-P", "--tflops", "--hbm-tbps",
                         "--seed"],
    "design moe": ["--hidden", "--inter", "--experts", "--topk", "--tokens", "--tile", "--tflops", "-K", "-P",
                   "--staging"],
    "design attention": ["--seq", "--head-dim", "--tile", "--out-bytes", "--sigma", "--tflops", "-K", "-P",
                         "--staging"],
    "design paper": ["-P", "--tflops", "--attn-tflops"],
    "simulate moe": ["--hidden", "--inter", "--experts", "--topk", "--tokens", "--skew", "--seed", "--tile",
                     "--l1-cols", "--l2-cols", "--out-bytes", "--tflops", "-K", "-P", "--roles", "-D",
                     "--experts-per-wave", "--wave-lag", "--depth", "--staging", "--t-l1", "--t-l2"],
    "fit": ["--bursts", "--sm-count", "--world-size"],
}
VALUES = ["0", "-1", "3", "2147483647", "2147483648", "9223372036854775807", "1e308", "nan", "inf", "-inf",
          "1e-300", "", "abc", "1G", "128x0", "0x0", "5us", "1e30ms"]
LIMIT_S = 20  # a valid run of these shapes takes well under a second (several under the sanitizers)



def readings(value):
    """The value as written and as the CLI reads it: K/M/G = powers of 1024, 0x = hexadecimal."""
    out = {value}
    m = re.fullmatch(r"(\d+)([KMG])", value)
    if m:
        out.add(str(int(m.group(1)) * 1024 ** "KMG".index(m.group(2)) * 1024))
    if re.fullmatch(r"0x[0-9a-fA-F]+", value):
        out.add(str(int(value, 16)))
    return out


def as_token(value, text):
    """value stands in text on its own: not inside a longer number or word ("0" is not named by "10" or "0.5")."""
    return re.search(r"(?<![\w.+-])" + re.escape(value) + r"(?!\w|\.\d)", text) is not None


def with_option(base, option, value):
    """base with option set to value: replaced where base gives it, appended otherwise."""
    if option in base:
        i = base.index(option)
        return base[:i + 1] + [value] + base[i + 2:]
    return base + [option, value]


def names_of(cmd):
    """Every option's names from the command's help: {"-K": {"-K", "--producers"}, "--producers": ...}."""
    text = subprocess.run([xstage] + cmd.split() + ["--help"], capture_output=True, text=True, timeout=LIMIT_S).stdout
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s+(-[\w-]+(?:,--?[\w-]+)*)", line)
        if m:
            names = set(m.group(1).split(","))
            for n in names:
                out[n] = names
    return out


def stem(names):
    """The quantity an option sets, as messages word it: its long name without dashes (--tokens -> tokens, --inter ->
    inter, as in "intermediate size" and "h_inter")."""
    return max(names, key=len).lstrip("-").replace("-", " ").lower()


env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1")
failures, runs = [], 0
for cmd, options in OPTIONS.items():
    aliases = names_of(cmd)
    for option in options:
        if option not in aliases:
            failures.append(f"{cmd} --help does not list {option}")
            continue
        for value in VALUES:
            args = [xstage] + cmd.split() + with_option(BASE[cmd], option, value)
            runs += 1
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=LIMIT_S, env=env)
            except subprocess.TimeoutExpired:
                failures.append(f"{' '.join(args[1:])}: still running after {LIMIT_S} s")
                continue
            out = r.stdout + r.stderr
            if "Sanitizer" in out or "runtime error" in out:
                failures.append(f"{' '.join(args[1:])}: sanitizer report:\n{out[-2000:]}")
            elif r.returncode not in (0, 2):
                failures.append(f"{' '.join(args[1:])}: exit {r.returncode} (want 0, or 2 with one error line):\n"
                                f"{out[-600:]}")
            elif r.returncode == 2 and len(r.stderr.strip().splitlines()) != 1:
                failures.append(f"{' '.join(args[1:])}: exit 2 with {len(r.stderr.strip().splitlines())} lines "
                                f"on stderr:\n{r.stderr[-600:]}")
            elif r.returncode == 2 and not any(as_token(w, r.stderr) for w in readings(value) - {""}) \
                    and not any(a in r.stderr for a in aliases[option]) \
                    and stem(aliases[option]) not in r.stderr.lower():
                failures.append(f"{' '.join(args[1:])}: the error names neither {option}, its quantity nor {value!r}: "
                                f"{r.stderr.strip()}")
print(f"{runs} runs, {len(failures)} failures")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
