#!/usr/bin/env python3
"""CPU test of scripts/moe-summary.py, the merge that writes issue 11's results/moe/p1/summary.json and table.md.

Two synthetic bench_moe runs (one per precision; rows as bench_moe writes them) are merged, and every aggregate is
checked against values computed here by hand: configuration counts, the geomean and min of fused/unfused, the lowest
DeepSeek-V4 W8A8 ceiling fraction per token count, the run metadata it carries (machine, commands, kernel_build,
padding_rows), the table's rows; then the refusals (runs of two machines). Exits non-zero on the first failure."""
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "moe-summary.py")


def row(shape, prec, tokens, routing, fused_ms, unfused_ms, ceil_ms, correct=True, stream_ms=None, flipped=False):
    flops = 1e12  # per call; TFLOP/s columns are flops / ms / 1e9
    r = {"shape": shape, "precision": prec, "tokens": tokens, "routing": routing, "flops": flops,
            "fused_backend": "fused_interleaved", "ms_fused_interleaved": fused_ms, "ms_unfused": unfused_ms,
            "ms_ceiling": ceil_ms, "fused_vs_unfused": unfused_ms / fused_ms, "ceiling_fraction": ceil_ms / fused_ms,
            "ref_rel_rms": 3e-3, "ref_requant_rel_rms": 2.2e-2, "correct": correct, "fused_vs_unfused_flipped": flipped}
    if stream_ms is not None:  # the memory floor, as bench_moe writes it (runs before session 62 have none)
        bound = max(ceil_ms, stream_ms)
        r.update({"ms_stream": stream_ms, "bound_ms": bound, "bound_by": "memory" if stream_ms > ceil_ms else "compute",
                  "bound_fraction": bound / fused_ms})
    return r


def write_run(d, rows, machine="NVIDIA H200, 132 SMs", extra=None):
    os.makedirs(d, exist_ok=True)
    s = {"rows": rows, "command": f"bench_moe --out {d}", "machine": machine, "ranks": 1,
         "emulated_ranks_tested": [2, 4, 8]}
    s.update(extra or {})
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(s, f)


def merge(tmp, runs):
    out = os.path.join(tmp, "out")
    p = subprocess.run([sys.executable, SCRIPT, "--runs", *runs, "--out-moe", os.path.join(out, "moe"),
                        "--out-schedule", os.path.join(out, "sched")], capture_output=True, text=True)
    return p, os.path.join(out, "moe")


def check(cond, what):
    if not cond:
        sys.exit("check_moe_summary: FAILED: " + what)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        w8 = [row("deepseek-v4-pro", "w8a8", 8192, "skewed", 10.0, 17.0, 5.3, stream_ms=6.4),    # 0.53; bound 0.64 m
              row("deepseek-v4-flash", "w8a8", 8192, "balanced", 3.5, 7.5, 2.0, stream_ms=1.5),  # 0.571; 0.571 c
              row("deepseek-v4-pro", "w8a8", 32768, "balanced", 30.0, 39.0, 21.0),  # 0.70
              row("dit-moe-xl", "w8a8", 8192, "balanced", 0.7, 1.0, 0.1)]         # not a V4 shape: 0.14 ignored
        w4 = [row("deepseek-v4-pro", "w4a8", 8192, "skewed", 11.0, 28.0, 1.0),    # W4A8: not in the V4 bar
              row("qwen3-30b-a3b", "w4a8", 2048, "skewed", 1.0, 1.2, 0.5, correct=False)]
        d8, d4 = os.path.join(tmp, "w8"), os.path.join(tmp, "w4")
        software = {"xstage": "0.1.0", "git": "0123456789ab", "cuda_build": "13.0", "cuda_runtime": "13.0",
                    "cuda_driver": "13.0", "nccl_build": "2.28.9", "nccl_runtime": "2.28.9"}
        write_run(d8, w8, extra={"kernel_build": "", "padding_rows": "0xFF, the poison before the correctness run",
                                 "software": software})
        write_run(d4, w4, extra={"kernel_build": "", "padding_rows": "0xFF, the poison before the correctness run",
                                 "software": dict(software)})
        p, out = merge(tmp, [d8, d4])
        check(p.returncode == 0, f"merge failed: {p.stderr}")
        s = json.load(open(os.path.join(out, "summary.json")))
        ratios = [r["fused_vs_unfused"] for r in w8 + w4]
        check(s["configs"] == 6, f"configs {s['configs']} != 6")
        check(s["correct_configs"] == 5, f"correct_configs {s['correct_configs']} != 5")
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        check(abs(s["geomean_fused_vs_unfused"] - g) < 1e-12, f"geomean {s['geomean_fused_vs_unfused']} != {g}")
        check(abs(s["geomean_fused_vs_unfused_p1"] - g) < 1e-12, "geomean_fused_vs_unfused_p1")
        check(abs(s["min_fused_vs_unfused_p1"] - 1.2) < 1e-12, f"min {s['min_fused_vs_unfused_p1']} != 1.2")
        check(abs(s["ceiling_fraction_v4_w8a8_8k"] - 5.3 / 10.0) < 1e-12,
              f"8K V4 fraction {s['ceiling_fraction_v4_w8a8_8k']} != 0.53 (the lower V4 W8A8 point)")
        check(abs(s["ceiling_fraction_v4_w8a8_32k"] - 0.7) < 1e-12, "32K V4 fraction")
        check(abs(s["bound_fraction_v4_w8a8_8k"] - 2.0 / 3.5) < 1e-12,
              f"8K V4 bound fraction {s['bound_fraction_v4_w8a8_8k']} != 0.571 (the lower of 0.64 memory, 0.571 compute)")
        check(s["bound_fraction_v4_w8a8_32k"] is None, "a 32K row without a stream gives no bound fraction")
        check(s["memory_bound_configs"] == 1, f"memory_bound_configs {s['memory_bound_configs']} != 1")
        check(s["fused_beats_unfused_everywhere"] is True, "fused_beats_unfused_everywhere")
        check(s["fused_vs_unfused_order_checked"] == 6 and s["fused_vs_unfused_flipped"] == [],
              f"order checks: {s['fused_vs_unfused_order_checked']}, flipped {s['fused_vs_unfused_flipped']}")
        check(s["emulated_ranks_tested"] == [2, 4, 8], "emulated_ranks_tested")
        check(s["machine"] == "NVIDIA H200, 132 SMs", "machine")
        check(s["command"] == [f"bench_moe --out {d8}", f"bench_moe --out {d4}"], "commands, one per run")
        check(s.get("padding_rows") == "0xFF, the poison before the correctness run", "padding_rows carried")
        check(s.get("kernel_build") == "", "kernel_build carried")
        check(s.get("software") == software, f"one software object carried: {s.get('software')}")
        table = open(os.path.join(out, "table.md")).read().splitlines()
        check(len(table) == 2 + 6, f"table rows {len(table) - 2} != 6")
        check("| NO |" in table[-1] and table[-1].startswith("| qwen3-30b-a3b | w4a8"), "the incorrect row says NO")
        check("| 0.530 |" in table[2], f"the V4-Pro row's fraction of ceiling: {table[2]}")
        check("| 6.400 | 0.640 m |" in table[2], f"the V4-Pro row's stream time and fraction of bound: {table[2]}")
        check("| 1.500 | 0.571 c |" in table[3], f"the V4-Flash row's (compute-bound): {table[3]}")
        check("| - | - |" in table[4], f"a row without a stream: {table[4]}")

        # a run slower than unfused somewhere, and runs that disagree on their padding rows: both said
        glm = row("glm-flash", "w4a8", 32768, "balanced", 2.0, 1.9, 1.0, flipped=True)
        glm.update({"interleaved_vs_wave": 0.97, "interleaved_vs_wave_flipped": True})  # both orders timed, order check
        write_run(d4, w4 + [glm],
                  extra={"padding_rows": "zeroed by every launch (zero_padding 1)"})
        p, out = merge(tmp, [d8, d4])
        check(p.returncode == 0, f"merge failed: {p.stderr}")
        s = json.load(open(os.path.join(out, "summary.json")))
        check(s["fused_beats_unfused_everywhere"] is False, "a slower point clears fused_beats_unfused_everywhere")
        check(len(s["configs_fused_slower"]) == 1 and s["configs_fused_slower"][0].startswith("glm-flash w4a8"),
              f"configs_fused_slower: {s['configs_fused_slower']}")
        check(s["fused_vs_unfused_flipped"] == ["glm-flash w4a8 balanced T=32768: 0.950"],
              f"a flipped ratio is named: {s['fused_vs_unfused_flipped']}")
        ss = json.load(open(os.path.join(tmp, "out", "sched", "summary.json")))
        check(ss["interleaved_vs_wave_order_checked"] == 1
              and ss["interleaved_vs_wave_flipped"] == ["glm-flash w4a8 balanced T=32768: 0.970"],
              f"a flipped order ratio is named: {ss['interleaved_vs_wave_order_checked']}, {ss['interleaved_vs_wave_flipped']}")
        check(isinstance(s.get("padding_rows"), list) and len(s["padding_rows"]) == 2, "both padding_rows values kept")
        check(s.get("software") == software, "a run without a software object adds none")

        # runs of two machines are refused, naming both
        write_run(d4, w4, machine="NVIDIA H100 80GB HBM3, 132 SMs")
        p, _ = merge(tmp, [d8, d4])
        check(p.returncode != 0 and "different machines" in p.stderr and "H100" in p.stderr,
              f"two machines not refused: rc {p.returncode}, {p.stderr!r}")
    print("check_moe_summary: all checks passed")


if __name__ == "__main__":
    main()
