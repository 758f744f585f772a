"""One benchmark protocol for every timed comparison in xstage (the method: docs/BENCHMARKING.md).

The H200 runs at its power limit under attention/GEMM load, so its SM clock moves with what ran just
before: a short timing inherits the clock of the previous kernel. The protocol therefore times
*steady-state blocks*: per backend its own warm-up (~0.3 s of back-to-back calls), then a timed block
(~1 s of back-to-back calls between two CUDA events, or CUDA-graph replays); blocks run in balanced
order (per round the listed order, then its reverse: A B C C B A), `rounds` times; inputs rotate per
call over the caller's input sets. Reported per backend: the median per-call time over its blocks,
min, max and spread (max - min) / median, and the medians of the first-half blocks (listed order) and
the second-half blocks (reverse order), so a ratio can be checked for an order effect. SM clock, power
and temperature are sampled with NVML (read-only) beside every block; null where NVML is absent.

    from xstage.bench_protocol import run_protocol, ratio, format_result
    res = run_protocol({"ours": f, "ref": g}, inputs, warmup_s=0.3, block_s=1.0, rounds=3)
    print(format_result(res, ref="ref")); r = ratio(res["stats"], "ours", "ref")  # r["ratio"] > 1: ours faster

No torch at import time: the pure functions (order, statistics, ratios) run anywhere; torch is imported
by the CUDA timers only. include/xstage/bench/protocol.hpp is the C++ twin (same order, statistics,
JSON field names); tests/bench/protocol_cases.json is checked by both.
"""
from __future__ import annotations

import ctypes
import math
import statistics
import threading
import time

__all__ = ["PROTOCOL_NAME", "FIRST", "SECOND", "block_order", "order_names", "calls_for_block", "n_input_sets",
           "median", "geomean", "aggregate_samples", "backend_stats", "summarize", "ratio", "protocol_string",
           "warm_up", "run_protocol", "format_result", "NvmlReader", "BlockSampler", "CudaEventTimer",
           "CudaGraphTimer", "WallTimer", "AgreedTimer", "torch_dist_agree", "nvml_index_from_env"]

PROTOCOL_NAME = "xstage-steady-state/1"
FIRST, SECOND = "first", "second"  # half of a round: listed order / reverse order
DEFAULT_WARMUP_S = 0.3
DEFAULT_BLOCK_S = 1.0
DEFAULT_ROUNDS = 3
DEFAULT_MIN_CALLS = 3
DEFAULT_MAX_CALLS = 1_000_000
HOST_BOUND_FRACTION = 0.8  # a block is flagged host-bound when host cost per call >= this x GPU time per call
SAMPLE_PERIOD_S = 0.02


# ----------------------------------------------------------------------------------------------------------
# Pure functions (CPU-tested; mirrored in include/xstage/bench/protocol.hpp)

def block_order(n_backends: int, rounds: int) -> list[tuple[int, int, str]]:
    """The blocks in run order as (backend index, round, half): per round the listed order (half
    'first') then its reverse (half 'second'); e.g. 2 backends: A B B A, 3: A B C C B A."""
    if n_backends < 1 or rounds < 1:
        raise ValueError(f"need n_backends >= 1 and rounds >= 1, got {n_backends}, {rounds}")
    out = []
    for r in range(rounds):
        out += [(i, r, FIRST) for i in range(n_backends)]
        out += [(i, r, SECOND) for i in reversed(range(n_backends))]
    return out


def order_names(names: list[str], rounds: int) -> list[str]:
    return [names[i] for i, _, _ in block_order(len(names), rounds)]


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))  # not Python's round(): banker's rounding differs from C++ llround


def calls_for_block(block_s: float, per_call_s: float | None, min_calls: int = DEFAULT_MIN_CALLS,
                    max_calls: int = DEFAULT_MAX_CALLS) -> int:
    """Calls in a timed block: block_s / per_call_s rounded half up, clamped to [min_calls, max_calls]
    (a zero or unknown per-call estimate gives max_calls)."""
    if per_call_s is None or not per_call_s > 0 or not math.isfinite(per_call_s):
        return max_calls
    return max(min_calls, min(max_calls, _round_half_up(block_s / per_call_s)))


def n_input_sets(set_bytes: int, l2_bytes: int, factor: float = 2.0, max_sets: int = 64) -> int:
    """Input sets to rotate over so that together they exceed factor x L2: floor(factor*L2/set) + 1,
    clamped to [1, max_sets]."""
    if set_bytes <= 0:
        raise ValueError(f"set_bytes must be positive, got {set_bytes}")
    return max(1, min(max_sets, int(math.floor(factor * l2_bytes / set_bytes)) + 1))


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def geomean(xs):
    xs = [x for x in xs if x is not None]
    if not xs or any(x <= 0 for x in xs):
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _div(a, b):
    return a / b if a is not None and b not in (None, 0) else None


_SAMPLE_KEYS = ("sm_clock_mhz", "power_w", "temp_c")


def aggregate_samples(samples: list[dict | None]) -> dict:
    """NVML samples of one block -> mean/min/max per quantity (null when no sample had it)."""
    samples = [s for s in samples if s]
    out = {}
    for k in _SAMPLE_KEYS:
        v = [s[k] for s in samples if s.get(k) is not None]
        out[k] = sum(v) / len(v) if v else None
        out[k + "_min"] = min(v) if v else None
        out[k + "_max"] = max(v) if v else None
    out["nvml_samples"] = len(samples)
    out["energy_w"] = counter_power_w(samples)
    return out


def counter_power_w(samples: list[dict | None]) -> float | None:
    """Mean power (W) from the cumulative energy counter over a block's samples (each with `t_s`, its reading time).
    The counter moves in steps (tens of ms apart on an H200: a 40 ms block saw one step or none), each holding the
    energy since its previous step, so the last minus the first reading of a short block counts a whole step for
    however little of it fell inside (a 40 ms block read ~1900 W at the 700 W cap). Each step is placed midway
    between the readings around it, and the power is the energy between the first and last steps over the time
    between them; None with fewer than two steps (a block shorter than about two update periods: no claim) or
    without reading times. The C++ twin: counter_power_w."""
    prev = None
    first = last = None
    for x in samples:
        if not x or x.get("energy_mj") is None or x.get("t_s") is None:
            continue
        if prev is not None and x["energy_mj"] > prev[1]:
            step = (0.5 * (prev[0] + x["t_s"]), x["energy_mj"])
            if first is None:
                first = step
            else:
                last = step
        prev = (x["t_s"], x["energy_mj"])
    if last is None or last[0] <= first[0]:
        return None
    return (last[1] - first[1]) / 1e3 / (last[0] - first[0])


def backend_stats(blocks: list[dict], name: str) -> dict:
    """Statistics of one backend's blocks: median/min/max per-call ms, spread = (max - min) / median,
    medians of its first-half and second-half blocks, mean SM clock / power / temperature of its blocks."""
    mine = [b for b in blocks if b["backend"] == name]
    t = [b["per_call_ms"] for b in mine]
    med = median(t)
    return {
        "blocks": len(mine),
        "median_ms": med,
        "min_ms": min(t) if t else None,
        "max_ms": max(t) if t else None,
        "spread": _div(max(t) - min(t), med) if t else None,
        "median_ms_first_half": median(b["per_call_ms"] for b in mine if b["half"] == FIRST),
        "median_ms_second_half": median(b["per_call_ms"] for b in mine if b["half"] == SECOND),
        "sm_clock_mhz": _mean(b.get("sm_clock_mhz") for b in mine),
        "power_w": _mean(b.get("power_w") for b in mine),
        "temp_c": _mean(b.get("temp_c") for b in mine),
        "host_bound_blocks": sum(1 for b in mine if b.get("host_bound")),
        "j_per_call": median(b["j_per_call"] for b in mine if b.get("j_per_call") is not None),
    }


def summarize(blocks: list[dict], names: list[str]) -> dict:
    return {n: backend_stats(blocks, n) for n in names}


def ratio(stats: dict, name: str, ref: str) -> dict:
    """How many times faster `name` is than `ref` (= ref time / name time = TFLOP/s ratio), from the
    medians over all blocks, over the first-half blocks only (listed order) and over the second-half
    blocks only (reverse order). flipped: the two halves fall on different sides of 1; order_gap:
    (first - second) / ratio."""
    a, b = stats.get(name), stats.get(ref)
    if not a or not b:
        return {"ratio": None, "ratio_first_half": None, "ratio_second_half": None, "flipped": None,
                "order_gap": None}
    r = _div(b["median_ms"], a["median_ms"])
    r1 = _div(b["median_ms_first_half"], a["median_ms_first_half"])
    r2 = _div(b["median_ms_second_half"], a["median_ms_second_half"])
    both = r1 is not None and r2 is not None
    return {"ratio": r, "ratio_first_half": r1, "ratio_second_half": r2,
            "flipped": (r1 - 1.0) * (r2 - 1.0) < 0 if both else None,
            "order_gap": _div(r1 - r2, r) if both else None}


def protocol_string(warmup_s: float, block_s: float, rounds: int, timer: str, n_inputs: int,
                    min_calls: int = DEFAULT_MIN_CALLS) -> str:
    return (f"{PROTOCOL_NAME}: per block warm-up {warmup_s:g} s + timed {block_s:g} s ({timer}), "
            f"order forward+reverse x {rounds} rounds ({2 * rounds} blocks per backend), "
            f"{n_inputs} input sets rotated, min {min_calls} calls/block, median per-call time")


# ----------------------------------------------------------------------------------------------------------
# Timers: now() -> seconds; time_calls(call, first, n) -> (seconds, calls made, host enqueue seconds or None)

class WallTimer:
    """CPU timer for dry runs and tests: the calls are synchronous, their wall time is the block time."""
    name = "wall"

    def now(self):
        return time.perf_counter()

    def time_calls(self, call, first, n):
        t0 = time.perf_counter()
        for c in range(first, first + n):
            call(c)
        return time.perf_counter() - t0, n, None


class CudaEventTimer:
    """n back-to-back calls on torch's current stream between two CUDA events (synchronised at the end)."""
    name = "events"

    def __init__(self):
        import torch
        self.torch = torch

    def now(self):
        return time.perf_counter()

    def time_calls(self, call, first, n):
        torch = self.torch
        stream = torch.cuda.current_stream()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(stream)
        h0 = time.perf_counter()
        for c in range(first, first + n):
            call(c)
        host = time.perf_counter() - h0
        e1.record(stream)
        e1.synchronize()
        return e0.elapsed_time(e1) / 1e3, n, host


class CudaGraphTimer(CudaEventTimer):
    """Replays of a CUDA graph holding `calls_per_graph` calls (calls 0..G-1, so the input rotation is
    inside the graph; G is a multiple of the number of input sets) between two CUDA events. The graph of
    a callable is captured on its first use (untimed); n calls become ceil(n / G) replays."""
    name = "graph"

    def __init__(self, calls_per_graph: int):
        super().__init__()
        self.calls_per_graph = max(1, int(calls_per_graph))
        self.graphs = {}

    def _graph(self, call):
        g = self.graphs.get(id(call))
        if g is None:
            torch = self.torch
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for c in range(self.calls_per_graph):
                    call(c)
            torch.cuda.synchronize()
            self.graphs[id(call)] = g
        return g

    def time_calls(self, call, first, n):
        torch = self.torch
        g = self._graph(call)
        replays = max(1, -(-n // self.calls_per_graph))
        stream = torch.cuda.current_stream()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(stream)
        h0 = time.perf_counter()
        for _ in range(replays):
            g.replay()
        host = time.perf_counter() - h0
        e1.record(stream)
        e1.synchronize()
        return e0.elapsed_time(e1) / 1e3, replays * self.calls_per_graph, host


# ----------------------------------------------------------------------------------------------------------
# NVML, read-only (never a setter): SM clock, power, temperature

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


def nvml_index_from_env(cuda_device: int = 0):
    """The NVML device of CUDA device `cuda_device`: CUDA_VISIBLE_DEVICES' entry (an index or a GPU-UUID)
    when set, else the same index (NVML numbers all GPUs, CUDA only the visible ones)."""
    import os
    vis = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if cuda_device < len(vis):
        v = vis[cuda_device]
        return int(v) if v.isdigit() else v
    return cuda_device


class NvmlReader:
    """dlopen's libnvidia-ml.so.1 and reads one device; `available` is False (and read() None) when the
    library or the device is absent. Only getters are called."""

    def __init__(self, device=0, libname="libnvidia-ml.so.1"):
        self.available, self.error, self.lib, self.handle = False, None, None, None
        try:
            lib = ctypes.CDLL(libname)
            if lib.nvmlInit_v2() != 0:
                raise OSError("nvmlInit_v2 failed")
            handle = ctypes.c_void_p()
            if isinstance(device, str):
                rc = lib.nvmlDeviceGetHandleByUUID(device.encode(), ctypes.byref(handle))
            else:
                rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(device)), ctypes.byref(handle))
            if rc != 0:
                lib.nvmlShutdown()
                raise OSError(f"no NVML device {device!r} (nvml error {rc})")
            self.lib, self.handle, self.available = lib, handle, True
        except (OSError, AttributeError) as e:
            self.error = str(e)

    def read(self) -> dict | None:
        if not self.available:
            return None
        v = ctypes.c_uint()
        lib, h = self.lib, self.handle
        clock = float(v.value) if lib.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, ctypes.byref(v)) == 0 else None
        power = v.value / 1000.0 if lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(v)) == 0 else None
        temp = float(v.value) if lib.nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, ctypes.byref(v)) == 0 else None
        mj, energy = ctypes.c_ulonglong(), None
        fn = getattr(lib, "nvmlDeviceGetTotalEnergyConsumption", None)  # Volta and newer
        if fn is not None and fn(h, ctypes.byref(mj)) == 0:
            energy = float(mj.value)
        return {"sm_clock_mhz": clock, "power_w": power, "temp_c": temp, "energy_mj": energy}

    def close(self):
        if self.available:
            self.lib.nvmlShutdown()
            self.available = False


class BlockSampler:
    """Context manager: reads `reader` at entry, every `period_s` in a background thread, and at exit;
    summary() aggregates the samples. Without NVML it samples nothing (fields null)."""

    def __init__(self, reader, period_s: float = SAMPLE_PERIOD_S):
        self.reader, self.period_s, self.samples = reader, period_s, []
        self._stop = threading.Event()
        self._thread = None

    def _stamped(self):
        """A reading with its time since entry (`t_s`, s), taken after the getters return."""
        s = self.reader.read()
        if s is not None:
            s = dict(s, t_s=time.perf_counter() - self._t0)
        return s

    def _loop(self):
        while not self._stop.wait(self.period_s):
            self.samples.append(self._stamped())

    def __enter__(self):
        if self.reader is not None and getattr(self.reader, "available", False):
            self._t0 = time.perf_counter()
            self.samples.append(self._stamped())
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.samples.append(self._stamped())
        return False

    def summary(self) -> dict:
        return aggregate_samples(self.samples)


# ----------------------------------------------------------------------------------------------------------
# The protocol

class AgreedTimer:
    """A timer whose calls span ranks (one process per GPU, each calling a collective): every rank times the same
    number of calls per block (the most any rank asked for) and ends its warm-up only when every rank's time is up,
    so no rank waits in a collective that a peer never calls. `agree(value, op)` returns the int agreed across the
    ranks, op "max" or "min" (torch_dist_agree() for torch.distributed); `timer` does the timing (name kept).
    The C++ twin: AgreedTimer in include/xstage/bench/agreed_timer.cuh."""

    def __init__(self, timer, agree):
        self.timer, self.agree = timer, agree
        self.name = getattr(timer, "name", type(timer).__name__)

    def now(self):
        return self.timer.now()

    def time_calls(self, call, first, n):
        return self.timer.time_calls(call, first, int(self.agree(n, "max")))

    def all_done(self, done):
        return bool(self.agree(int(done), "min"))


def torch_dist_agree(group=None):
    """agree(value, op) for AgreedTimer over torch.distributed (an all-reduce of one int on the current device)."""
    import torch
    import torch.distributed as dist
    ops = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}

    def agree(value, op):
        if op not in ops:
            raise ValueError(f"agree: op must be 'max' or 'min', got {op!r}")
        t = torch.tensor([int(value)], device="cuda")
        dist.all_reduce(t, op=ops[op], group=group)
        return int(t.item())
    return agree


def warm_up(timer, call, seconds: float, first: int = 0, max_calls: int = DEFAULT_MAX_CALLS) -> dict:
    """Back-to-back calls in chunks of 1, 2, 4, ... (each timed by `timer`, capped by the time left) until
    `seconds` of wall time have passed (at least one chunk; with a timer that has all_done(done), as one whose
    calls span ranks, until it says every rank is done). per_call_s: the last chunk's time per call
    (the estimate that sizes the block); host_s_per_call: the smallest host enqueue time per call over
    the chunks (a chunk starts on an idle device, so small chunks show the pure host cost)."""
    t0 = timer.now()
    n, calls, per_call, host = 1, 0, None, None
    while True:
        secs, done, host_s = timer.time_calls(call, first + calls, n)
        calls += done
        per_call = secs / done
        if host_s is not None:
            host = host_s / done if host is None else min(host, host_s / done)
        left = seconds - (timer.now() - t0)
        all_done = getattr(timer, "all_done", None)  # a timer spanning ranks: done only when every rank is
        if (all_done(left <= 0) if all_done else left <= 0):
            break
        n = max(1, min(2 * n, max_calls, math.ceil(left / per_call) if per_call > 0 else 2 * n))
    return {"calls": calls, "seconds": timer.now() - t0, "per_call_s": per_call, "host_s_per_call": host}


def run_protocol(backends: dict, inputs: list, warmup_s: float = DEFAULT_WARMUP_S, block_s: float = DEFAULT_BLOCK_S,
                 rounds: int = DEFAULT_ROUNDS, use_graph: bool = False, nvml_device=0,
                 min_calls: int = DEFAULT_MIN_CALLS, max_calls: int = DEFAULT_MAX_CALLS, timer=None, reader=None,
                 sample_period_s: float = SAMPLE_PERIOD_S, log=None) -> dict:
    """Times every backend (name -> callable(input_set)) by the protocol; returns a JSON-ready dict with
    protocol, params, backends, order, blocks (every timed block) and stats (per backend).

    Call c of a backend (counted over its warm-ups and blocks) gets inputs[c % len(inputs)]. timer:
    default CudaEventTimer (CudaGraphTimer with use_graph); WallTimer for CPU runs. reader: an NvmlReader
    (default: one for nvml_device, closed at the end) or any object with .available and .read()."""
    names = list(backends)
    if not names:
        raise ValueError("no backends")
    if not inputs:
        raise ValueError("no input sets")
    k = len(inputs)
    if timer is None:
        timer = CudaGraphTimer(k * math.ceil(16 / k)) if use_graph else CudaEventTimer()
    own_reader = reader is None
    if own_reader:
        reader = NvmlReader(nvml_device)
    nvml_ok = bool(getattr(reader, "available", False))
    calls = {n: (lambda c, fn=backends[n]: fn(inputs[c % k])) for n in names}
    counter = {n: 0 for n in names}
    blocks = []
    try:
        for index, (b, rnd, half) in enumerate(block_order(len(names), rounds)):
            name = names[b]
            w = warm_up(timer, calls[name], warmup_s, counter[name], max_calls)
            counter[name] += w["calls"]
            n = calls_for_block(block_s, w["per_call_s"], min_calls, max_calls)
            with BlockSampler(reader, sample_period_s) as sampler:
                secs, done, host_s = timer.time_calls(calls[name], counter[name], n)
            counter[name] += done
            per_call_ms = secs * 1e3 / done
            host_ms = w["host_s_per_call"] * 1e3 if w["host_s_per_call"] is not None else None
            blk = {"index": index, "round": rnd, "half": half, "backend": name,
                   "warmup_calls": w["calls"], "warmup_s": w["seconds"], "calls": done,
                   "block_ms": secs * 1e3, "per_call_ms": per_call_ms, "host_ms_per_call": host_ms,
                   "host_bound": host_ms is not None and host_ms >= HOST_BOUND_FRACTION * per_call_ms}
            blk.update(sampler.summary())
            # the block's energy at the counter's mean power (counter_power_w), and per call
            blk["energy_j"] = blk["energy_w"] * secs if blk["energy_w"] is not None else None
            blk["j_per_call"] = blk["energy_j"] / done if blk["energy_j"] is not None else None
            blocks.append(blk)
            if log:
                log(f"  block {index:2d} {name:>14s} {half:6s} {done:7d} calls {per_call_ms:10.4f} ms/call"
                    + (f" {blk['sm_clock_mhz']:6.0f} MHz" if blk["sm_clock_mhz"] is not None else "")
                    + (f" {blk['power_w']:5.0f} W" if blk["power_w"] is not None else ""))  # (NVML may give one alone)
    finally:
        if own_reader:
            reader.close()
    timer_name = getattr(timer, "name", type(timer).__name__)
    return {
        "protocol": protocol_string(warmup_s, block_s, rounds, timer_name, k, min_calls),
        "params": {"warmup_s": warmup_s, "block_s": block_s, "rounds": rounds, "min_calls": min_calls,
                   "max_calls": max_calls, "timer": timer_name, "n_inputs": k,
                   "nvml_device": nvml_device if isinstance(nvml_device, (int, str)) else str(nvml_device)},
        "nvml": nvml_ok,
        "backends": names,
        "order": order_names(names, rounds),
        "blocks": blocks,
        "stats": summarize(blocks, names),
    }


def format_result(result: dict, ref: str | None = None) -> str:
    """A table: per backend median/min/max ms, spread, half medians, clock, power; ratios vs `ref`."""
    def f(x, spec):
        return format(x, spec) if x is not None else "-".rjust(len(format(0.0, spec)))
    lines = [result["protocol"],
             f"{'backend':>14} {'median ms':>10} {'min ms':>10} {'max ms':>10} {'spread':>7} {'1st half':>10} "
             f"{'2nd half':>10} {'SM MHz':>7} {'W':>5} {'host-bound':>10}" + (f" {'vs ' + ref:>10} {'1st/2nd':>13}" if ref else "")]
    for n in result["backends"]:
        s = result["stats"][n]
        line = (f"{n:>14} {f(s['median_ms'], '10.4f')} {f(s['min_ms'], '10.4f')} {f(s['max_ms'], '10.4f')} "
                f"{f(None if s['spread'] is None else 100 * s['spread'], '6.1f')}% "
                f"{f(s['median_ms_first_half'], '10.4f')} {f(s['median_ms_second_half'], '10.4f')} "
                f"{f(s['sm_clock_mhz'], '7.0f')} {f(s['power_w'], '5.0f')} {s['host_bound_blocks']:>10d}")
        if ref:
            r = ratio(result["stats"], n, ref)
            line += (f" {f(r['ratio'], '10.3f')} {f(r['ratio_first_half'], '6.3f')}/{f(r['ratio_second_half'], '6.3f')}"
                     + (" FLIPS" if r["flipped"] else ""))
        lines.append(line)
    return "\n".join(lines)
