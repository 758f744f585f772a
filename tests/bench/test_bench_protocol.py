"""CPU tests of python/xstage/bench_protocol.py (no torch, no GPU): the shared cases of
tests/bench/protocol_cases.json (also checked by the C++ twin, test_protocol.cpp), order properties,
the warm-up and the driver on a fake clock, NVML absent/present, and no torch import.

Runs under pytest, or as a plain script (exit 1 on any failure): python3 tests/bench/test_bench_protocol.py
"""
import json
import math
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
from xstage import bench_protocol as bp  # noqa: E402

CASES = json.loads((HERE / "protocol_cases.json").read_text())


def close(a, b, rel=1e-9):
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def assert_dict_close(got, expect, what):
    assert set(got) == set(expect), f"{what}: keys {sorted(got)} != {sorted(expect)}"
    for k, v in expect.items():
        assert close(got[k], v), f"{what}.{k}: {got[k]!r} != {v!r}"


# --- shared cases ---------------------------------------------------------------------------------------

def test_cases_block_order():
    for c in CASES["block_order"]:
        got = [list(x) for x in bp.block_order(c["n_backends"], c["rounds"])]
        assert got == c["expect"], (c, got)


def test_cases_calls_for_block():
    for c in CASES["calls_for_block"]:
        got = bp.calls_for_block(c["block_s"], c["per_call_s"], c["min_calls"], c["max_calls"])
        assert got == c["expect"], (c, got)


def test_cases_n_input_sets():
    for c in CASES["n_input_sets"]:
        got = bp.n_input_sets(c["set_bytes"], c["l2_bytes"])
        assert got == c["expect"], (c, got)
        if got < 64:
            assert got * c["set_bytes"] > 2 * c["l2_bytes"]


def test_cases_aggregate_samples():
    for c in CASES["aggregate_samples"]:
        assert_dict_close(bp.aggregate_samples(c["samples"]), c["expect"], "aggregate_samples")


def test_cases_stats_and_ratios():
    for c in CASES["stats"]:
        stats = bp.summarize(c["blocks"], c["backends"])
        for name, expect in c["expect"].items():
            assert_dict_close(stats[name], expect, f"stats[{name}]")
        for r in c["ratios"]:
            assert_dict_close(bp.ratio(stats, r["name"], r["ref"]), r["expect"], f"ratio({r['name']}, {r['ref']})")


def test_cases_geomean_and_protocol_string():
    for c in CASES["geomean"]:
        assert close(bp.geomean(c["xs"]), c["expect"]), c
    for c in CASES["protocol_string"]:
        got = bp.protocol_string(c["warmup_s"], c["block_s"], c["rounds"], c["timer"], c["n_inputs"], c["min_calls"])
        assert got == c["expect"], got


# --- properties -----------------------------------------------------------------------------------------

def test_order_is_balanced():
    for n in range(1, 6):
        for rounds in range(1, 4):
            order = bp.block_order(n, rounds)
            assert len(order) == 2 * n * rounds
            for b in range(n):
                mine = [x for x in order if x[0] == b]
                assert len(mine) == 2 * rounds
                assert sum(1 for x in mine if x[2] == bp.FIRST) == rounds
            # each ordered pair (a before b) occurs equally often within the halves: a half is a permutation
            # and the second half is the first reversed
            for r in range(rounds):
                first = [x[0] for x in order if x[1] == r and x[2] == bp.FIRST]
                second = [x[0] for x in order if x[1] == r and x[2] == bp.SECOND]
                assert first == list(range(n)) and second == first[::-1]
    assert bp.order_names(["A", "B"], 1) == ["A", "B", "B", "A"]
    assert bp.order_names(["A", "B", "C"], 1) == ["A", "B", "C", "C", "B", "A"]
    for bad in ((0, 1), (1, 0)):
        try:
            bp.block_order(*bad)
        except ValueError:
            continue
        raise AssertionError(f"block_order{bad} accepted")


def test_median_and_ratio_edges():
    assert bp.median([3, 1, 2]) == 2 and bp.median([4, 1, 2, 3]) == 2.5 and bp.median([]) is None
    assert bp.geomean([1.0, -1.0]) is None
    r = bp.ratio({"a": bp.backend_stats([], "a")}, "a", "missing")
    assert r["ratio"] is None and r["flipped"] is None
    s = bp.summarize([{"backend": "a", "half": "first", "per_call_ms": 2.0}], ["a", "b"])
    assert s["a"]["median_ms_second_half"] is None and s["b"]["median_ms"] is None
    assert bp.ratio(s, "a", "b")["ratio"] is None


# --- driver on a fake clock -----------------------------------------------------------------------------

class FakeClock:
    """Virtual time: a fake backend call advances it by its cost; timing is exact and instant."""

    def __init__(self):
        self.t = 0.0

    def backend(self, cost_s, seen=None, name=None):
        def call(inp):
            self.t += cost_s
            if seen is not None:
                seen.setdefault(name, []).append(inp)
        return call


class FakeTimer:
    name = "fake"

    def __init__(self, clock, host_s_per_call=None):
        self.clock, self.host = clock, host_s_per_call
        self.chunks = []

    def now(self):
        return self.clock.t

    def time_calls(self, call, first, n):
        t0 = self.clock.t
        for c in range(first, first + n):
            call(c)
        self.chunks.append(n)
        return self.clock.t - t0, n, None if self.host is None else self.host * n


class NoNvml:
    available = False

    def read(self):
        return None


def test_warm_up_waits_for_every_ranks_stop():
    """A timer spanning ranks (the torch harnesses' AgreedTimer) stops the warm-up only when every rank is done: the
    other rank here is done at 0.75 s, so this one, done at 0.5 s, goes on one call at a time (as the C++ one)."""
    clock = FakeClock()
    timer = FakeTimer(clock)
    timer.all_done = lambda done: done and clock.t >= 0.75
    w = bp.warm_up(timer, clock.backend(1 / 64), 0.5)
    assert timer.chunks == [1, 2, 4, 8, 16, 1] + [1] * 16, timer.chunks
    assert w["seconds"] == 0.75 and w["calls"] == 48


def test_agreed_timer_takes_the_ranks_agreement():
    """bp.AgreedTimer (the torch harnesses' timer) with a fake agreement standing in for a peer that asks for twice
    the calls and is done at 0.75 s: every chunk is the peer's count, the warm-up ends at the peer's stop, and the
    wrapped timer's name is the protocol's; an op other than max/min is the agreement's error, not swallowed."""
    clock = FakeClock()
    inner = FakeTimer(clock)
    asked = []

    def agree(value, op):
        asked.append(op)
        return max(value, 2 * value) if op == "max" else min(value, int(clock.t >= 0.75))
    timer = bp.AgreedTimer(inner, agree)
    assert timer.name == "fake" and timer.now() == clock.t
    w = bp.warm_up(timer, clock.backend(1 / 64), 0.5)
    assert inner.chunks == [2, 4, 8, 16, 4] + [2] * 7, inner.chunks  # its own asks: 1, 2, 4, 8, 2, then 1 each
    assert w["seconds"] == 0.75 and w["calls"] == 48, w
    assert set(asked) == {"max", "min"} and asked.count("max") == asked.count("min") == len(inner.chunks)
    secs, done, _ = timer.time_calls(clock.backend(1 / 64), 0, 3)
    assert done == 6 and secs == 6 / 64
    res = bp.run_protocol({"a": clock.backend(1 / 64)}, ["s"], warmup_s=0.05, block_s=0.1, rounds=1, timer=timer,
                          reader=NoNvml())
    assert res["params"]["timer"] == "fake" and all(b["calls"] % 2 == 0 for b in res["blocks"])

    def bad_agree(value, op):
        raise ValueError(f"agree: op must be 'max' or 'min', got {op!r}")
    try:
        bp.AgreedTimer(inner, bad_agree).all_done(True)
    except ValueError as e:
        assert "'min'" in str(e)
    else:
        raise AssertionError("the agreement's error was swallowed")


def test_warm_up_doubles_and_stops():
    clock = FakeClock()
    timer = FakeTimer(clock, host_s_per_call=1e-4)
    w = bp.warm_up(timer, clock.backend(1 / 64), 0.5)  # binary fractions: exact virtual time
    # 1+2+4+8 = 15 calls (0.234 s); doubling caps at 16 (17 would fit); then the 1 call left to 0.5 s
    assert timer.chunks == [1, 2, 4, 8, 16, 1], timer.chunks
    assert w["seconds"] == 0.5 and w["calls"] == 32
    assert close(w["per_call_s"], 1 / 64) and close(w["host_s_per_call"], 1e-4)
    w = bp.warm_up(FakeTimer(clock), clock.backend(0.5), 0.3)  # one call already exceeds the warm-up
    assert w["calls"] == 1 and w["host_s_per_call"] is None


def test_run_protocol_fake_clock():
    clock, seen = FakeClock(), {}
    inputs = ["s0", "s1", "s2"]
    backends = {"fast": clock.backend(0.001, seen, "fast"), "slow": clock.backend(0.002, seen, "slow")}
    res = bp.run_protocol(backends, inputs, warmup_s=0.05, block_s=0.2, rounds=3, timer=FakeTimer(clock, 5e-4),
                          reader=NoNvml())
    json.dumps(res)  # JSON-ready
    fields = CASES["json_fields"]
    assert list(res) == fields["result"] and list(res["params"]) == fields["params"]
    assert all(list(b) == fields["block"] for b in res["blocks"])
    assert all(list(s) == fields["stats"] for s in res["stats"].values())
    assert list(bp.ratio(res["stats"], "fast", "slow")) == fields["ratio"]
    assert res["order"] == ["fast", "slow", "slow", "fast"] * 3 and res["nvml"] is False
    assert res["protocol"].startswith(bp.PROTOCOL_NAME) and "fake" in res["protocol"]
    assert [b["index"] for b in res["blocks"]] == list(range(12))
    for b in res["blocks"]:
        cost = 0.001 if b["backend"] == "fast" else 0.002
        assert b["calls"] == round(0.2 / cost) and close(b["per_call_ms"], cost * 1e3)
        assert b["sm_clock_mhz"] is None and b["nvml_samples"] == 0
        assert close(b["host_ms_per_call"], 0.5) and b["host_bound"] == (0.5 >= 0.8 * cost * 1e3)
    s = res["stats"]
    assert s["fast"]["blocks"] == 6 and close(s["fast"]["median_ms"], 1.0) and close(s["fast"]["spread"], 0.0)
    assert s["fast"]["host_bound_blocks"] == 0 and s["slow"]["host_bound_blocks"] == 0
    r = bp.ratio(s, "fast", "slow")
    assert close(r["ratio"], 2.0) and close(r["ratio_first_half"], 2.0) and r["flipped"] is False
    # inputs rotate per call across warm-ups and blocks: consecutive calls never repeat a set
    for name, got in seen.items():
        assert got[:6] == inputs * 2 and all(a != b for a, b in zip(got, got[1:])), name
    text = bp.format_result(res, ref="slow")
    assert "fast" in text and "2.000" in text


def test_block_log_with_clock_but_no_power():
    """NVML may report the SM clock and not the power (or the other way round): the per-block log line names what it
    has (it raised a TypeError formatting the missing power before)."""
    class ClockOnly:
        available = True

        def __init__(self, clock=1500.0, power=None):
            self.clock, self.power = clock, power

        def read(self):
            return {"sm_clock_mhz": self.clock, "power_w": self.power, "temp_c": None, "energy_mj": None}

    for reader, want, absent in ((ClockOnly(), "1500 MHz", " W"), (ClockOnly(None, 640.0), "640 W", "MHz")):
        clock, lines = FakeClock(), []
        bp.run_protocol({"a": clock.backend(0.001), "b": clock.backend(0.002)}, ["s0", "s1"], warmup_s=0.01,
                        block_s=0.02, rounds=1, timer=FakeTimer(clock), reader=reader, log=lines.append)
        blocks = [x for x in lines if x.lstrip().startswith("block")]
        assert len(blocks) == 4, lines
        assert all(want in x and not x.endswith(absent) for x in blocks), blocks


def test_run_protocol_shows_order_effect():
    """A fake GPU whose clock drops after the 'heavy' backend for a while: the per-half ratios expose
    the order effect that a single ordering would bake into the ratio."""
    clock = FakeClock()
    state = {"hot_until": -1.0}

    def heavy(inp):
        clock.t += 0.002
        state["hot_until"] = clock.t + 0.3  # throttled for 300 ms after the heavy one stops

    def light(inp):
        clock.t += 0.001 * (1.2 if clock.t < state["hot_until"] else 1.0)

    res = bp.run_protocol({"light": light, "heavy": heavy}, [0], warmup_s=0.1, block_s=0.3, rounds=2,
                          timer=FakeTimer(clock), reader=NoNvml())
    r = bp.ratio(res["stats"], "light", "heavy")
    # first half: light runs first (after the previous round's light block: cool); second half: right after heavy
    assert r["ratio_first_half"] > r["ratio_second_half"], r
    assert r["order_gap"] > 0.05 and r["ratio_second_half"] < r["ratio"] < r["ratio_first_half"], r


# --- NVML -----------------------------------------------------------------------------------------------

def test_nvml_absent_is_null():
    r = bp.NvmlReader(0, libname="libnvidia-ml-definitely-absent.so.1")
    assert r.available is False and r.read() is None and r.error
    with bp.BlockSampler(r, 0.001) as s:
        time.sleep(0.01)
    assert s.summary()["nvml_samples"] == 0 and s.summary()["sm_clock_mhz"] is None
    real = bp.NvmlReader(0)  # on a GPU machine: a reading; on the CPU machine: None, no exception
    assert (real.read() is None) == (not real.available)
    real.close()


def test_block_sampler_threads_a_reader():
    class Fake:
        available = True
        n = 0

        def read(self):
            Fake.n += 1
            return {"sm_clock_mhz": 1500.0 + Fake.n, "power_w": 650.0, "temp_c": None, "energy_mj": 100.0 * Fake.n}

    with bp.BlockSampler(Fake(), 0.002) as s:
        deadline = time.monotonic() + 10  # on a loaded 2-core runner the sampler thread may start late
        while Fake.n < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
    out = s.summary()
    assert out["nvml_samples"] >= 3 and out["power_w"] == 650.0 and out["temp_c"] is None
    assert out["sm_clock_mhz_min"] == 1501.0 and out["sm_clock_mhz_max"] >= 1503.0
    # every reading is a counter step of 100 mJ, placed midway from the reading before: steps 2..n
    t = [x["t_s"] for x in s.samples]
    assert t == sorted(t) and t[0] >= 0.0
    n = len(t)
    want = 0.1 * (n - 2) / ((t[-2] + t[-1]) / 2 - (t[0] + t[1]) / 2)
    assert close(out["energy_w"], want)


def test_nvml_index_from_env():
    import os
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = "3,1"
        assert bp.nvml_index_from_env(0) == 3 and bp.nvml_index_from_env(1) == 1
        os.environ["CUDA_VISIBLE_DEVICES"] = "GPU-abc"
        assert bp.nvml_index_from_env(0) == "GPU-abc"
        del os.environ["CUDA_VISIBLE_DEVICES"]
        assert bp.nvml_index_from_env(2) == 2
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old


def test_no_torch_at_import():
    assert "torch" not in sys.modules


def test_wall_timer_runs_sleep_backends():
    res = bp.run_protocol({"a": lambda x: time.sleep(0.001), "b": lambda x: time.sleep(0.002)}, [None],
                          warmup_s=0.005, block_s=0.02, rounds=1, timer=bp.WallTimer(), reader=NoNvml())
    # A sleep lasts at least what it asks, so a wall timer can never report less; how much more depends on the
    # runner's load (a 2-core CI machine under ctest -j flipped a ratio test), so only the lower bounds are asserted.
    assert [b["backend"] for b in res["blocks"]] == ["a", "b", "b", "a"]
    for b in res["blocks"]:
        assert b["calls"] >= 1 and b["per_call_ms"] >= (1.0 if b["backend"] == "a" else 2.0), b
    assert res["params"]["timer"] == "wall" and res["blocks"][0]["host_ms_per_call"] is None


if __name__ == "__main__":
    failed = 0
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    for name, fn in tests:
        try:
            fn()
            print(f"PASS {name}")
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{len(tests) - failed}/{len(tests)} passed")
    sys.exit(1 if failed else 0)
