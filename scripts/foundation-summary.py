#!/usr/bin/env python3
"""Writes results/foundation/summary.json from what scripts/foundation-device.sh brought back.

    python3 scripts/foundation-summary.py --tests DIR_WITH_gpu-tests.log [--attention DIR_WITH_summary.json] -o OUT_DIR

Keys: emulated_ranks_tested (world sizes of the emulated peer-store cases that ran), wrong_bytes (total over
every peer-store case, emulated and real), epilogue_bitwise_equal (every case compared equal byte for byte,
and the GPU suite passed), attention_ratio_after_vs_before (geomean of before-time / after-time from the
attention benchmark's summary), machine, command. Exits 1 when a key cannot be filled honestly."""
import argparse
import json
import re
import sys
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", type=Path, required=True, help="folder with gpu-tests.log and machine.txt")
    ap.add_argument("--attention", type=Path, help="folder with the attention benchmark's summary.json")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()

    log = (args.tests / "gpu-tests.log").read_text()
    cases = {}
    for m in re.finditer(r"^\[xstage-result\] (.*)$", log, re.M):
        kv = dict(x.split("=", 1) for x in m.group(1).split())
        cases[tuple(sorted(kv.items()))] = kv  # the log holds ctest's run and a direct run: count each case once
    if not cases:
        sys.exit("no [xstage-result] lines in gpu-tests.log: the peer-store tests did not run")
    passed = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", log)
    if passed is None:
        passed_all = re.search(r"100% tests passed out of (\d+)", log) is not None
    else:
        passed_all = passed.group(2) == "0"
    wrong = sum(int(c["wrong_bytes"]) for c in cases.values())
    bad_counters = sum(int(c["bad_counters"]) for c in cases.values())
    summary = {
        "emulated_ranks_tested": sorted({int(c["world"]) for c in cases.values() if c["mode"] == "emulated"}),
        "real_ranks_tested": sorted({int(c["world"]) for c in cases.values() if c["mode"] == "real"}),
        "peer_store_cases": len(cases),
        "wrong_bytes": wrong,
        "bad_signal_counters": bad_counters,
        "epilogue_bitwise_equal": wrong == 0 and bad_counters == 0 and passed_all,
        "gpu_suite_passed": passed_all,
    }
    machine = (args.tests / "machine.txt").read_text().strip().splitlines()
    summary["machine"] = "nvidia-h200 (" + "; ".join(machine) + ")"
    summary["command"] = ("bash scripts/foundation-device.sh (device: build carried from the CPU machine; "
                          "FOUNDATION_BENCH=1 adds the attention benchmark), then python3 scripts/foundation-summary.py")
    if args.attention:
        a = json.loads((args.attention / "summary.json").read_text())
        r = a.get("attention_ratio_after_vs_before")
        if r is None:
            sys.exit("the attention summary has no attention_ratio_after_vs_before (run it with --lib-before)")
        summary["attention_ratio_after_vs_before"] = r
        summary["attention_ratio_after_vs_before_min"] = a.get("attention_ratio_after_vs_before_min")
        summary["attention_ratio_after_vs_before_max"] = a.get("attention_ratio_after_vs_before_max")
        summary["attention_protocol"] = a.get("protocol")
        summary["attention_command"] = a.get("command")
    else:
        summary["attention_ratio_after_vs_before"] = None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
