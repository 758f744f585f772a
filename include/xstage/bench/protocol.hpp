// The xstage benchmark protocol (docs/BENCHMARKING.md), C++ twin of python/xstage/bench_protocol.py:
// the same block order, statistics, ratios and JSON field names (tests/bench/protocol_cases.json is
// checked by both). Pure host C++17 (nvcc includes it from protocol_cuda.cuh); no CUDA, no NVML here.
//
//   order:    per round the listed backends, then the reverse (A B B A; A B C C B A), `rounds` times
//   block:    the backend's own warm-up (chunks of 1, 2, 4, ... calls for warmup_s of wall time), then
//             calls_for_block() back-to-back calls timed as one block; per-call time = block / calls
//   stats:    per backend median / min / max per-call ms over its blocks, spread = (max - min) / median,
//             medians of its first-half (listed order) and second-half (reverse order) blocks, median energy
//             per call (J) over the blocks in which NVML's energy counter stepped at least twice (counter_power_w)
//   ratio:    ref time / name time (> 1: name faster), over all blocks and per half; flipped when the
//             two halves fall on different sides of 1
//
// run_protocol() drives any Timer (protocol_cuda.cuh: CUDA events or graph replay; tests: a fake clock)
// and any Sampler (nvml.hpp: NVML in a background thread).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace xstage::bench {

inline constexpr const char* kProtocolName = "xstage-steady-state/1";
inline constexpr double kDefaultWarmupS = 0.3;
inline constexpr double kDefaultBlockS = 1.0;
inline constexpr int kDefaultRounds = 3;
inline constexpr long kDefaultMinCalls = 3;
inline constexpr long kDefaultMaxCalls = 1000000;
inline constexpr double kDefaultSamplePeriodS = 0.02;
inline constexpr double kHostBoundFraction = 0.8;

enum class Half { kFirst, kSecond };  // listed order / reverse order within a round
inline const char* half_name(Half h) { return h == Half::kFirst ? "first" : "second"; }

struct Slot {
  int backend;
  int round;
  Half half;
};

// The blocks in run order: per round the listed order (half first), then its reverse (half second).
inline std::vector<Slot> block_order(int n_backends, int rounds) {
  if (n_backends < 1 || rounds < 1) throw std::invalid_argument("block_order: need n_backends >= 1 and rounds >= 1");
  std::vector<Slot> out;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < n_backends; ++i) out.push_back({i, r, Half::kFirst});
    for (int i = n_backends - 1; i >= 0; --i) out.push_back({i, r, Half::kSecond});
  }
  return out;
}

// Calls in a timed block: block_s / per_call_s rounded half up, clamped to [min_calls, max_calls];
// a zero, negative or non-finite estimate gives max_calls.
inline long calls_for_block(double block_s, double per_call_s, long min_calls = kDefaultMinCalls,
                            long max_calls = kDefaultMaxCalls) {
  if (!(per_call_s > 0) || !std::isfinite(per_call_s)) return max_calls;
  const double n = std::floor(block_s / per_call_s + 0.5);
  if (n >= static_cast<double>(max_calls)) return max_calls;
  return std::max(min_calls, std::min(max_calls, static_cast<long>(n)));
}

// Input sets to rotate over so that together they exceed factor x L2: floor(factor*L2/set) + 1 in [1, max_sets].
inline int n_input_sets(double set_bytes, double l2_bytes, double factor = 2.0, int max_sets = 64) {
  if (!(set_bytes > 0)) throw std::invalid_argument("n_input_sets: set_bytes must be positive");
  const double n = std::floor(factor * l2_bytes / set_bytes) + 1;
  return static_cast<int>(std::max(1.0, std::min(static_cast<double>(max_sets), n)));
}

// Median (mean of the two middle values for an even count); nullopt for no values.
inline std::optional<double> median(std::vector<double> xs) {
  if (xs.empty()) return std::nullopt;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2.0;
}

inline std::optional<double> mean(const std::vector<std::optional<double>>& xs) {
  double s = 0;
  int n = 0;
  for (const auto& x : xs)
    if (x) s += *x, ++n;
  if (n == 0) return std::nullopt;
  return s / n;
}

inline std::optional<double> geomean(const std::vector<double>& xs) {
  if (xs.empty()) return std::nullopt;
  double s = 0;
  for (double x : xs) {
    if (!(x > 0)) return std::nullopt;
    s += std::log(x);
  }
  return std::exp(s / static_cast<double>(xs.size()));
}

inline std::optional<double> div_opt(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

// One NVML reading; a field is nullopt when its getter failed.
struct Sample {
  std::optional<double> sm_clock_mhz, power_w, temp_c;
  std::optional<double> energy_mj;  // the GPU's cumulative energy counter (mJ since the driver loaded)
  std::optional<double> t_s;        // when it was read, s on the sampler's steady clock (the energy estimate needs it)
};

struct SampleStats {
  std::optional<double> sm_clock_mhz, sm_clock_mhz_min, sm_clock_mhz_max;
  std::optional<double> power_w, power_w_min, power_w_max;
  std::optional<double> temp_c, temp_c_min, temp_c_max;
  int nvml_samples = 0;
  // Mean power from the energy counter, W: the counter moves in steps (tens of ms apart on an H200: a 40 ms block saw
  // one step or none), each holding the energy since its previous step, so the last minus the first reading of a
  // block counts a step's energy for however little of it fell inside the block (a 40 ms block read ~1900 W at the
  // 700 W cap). Instead each step is placed midway between the readings around it, and the power is the energy
  // between the block's first and last steps over the time between them. Null with fewer than two steps inside the
  // block (then no claim is made: a block shorter than about two update periods), or without reading times.
  std::optional<double> energy_w;
};

// The counter's steps among a block's samples: (time, value) of each reading that shows a new value, its time
// moved back to midway from the reading before (where the step happened, on average).
inline std::optional<double> counter_power_w(const std::vector<std::optional<Sample>>& samples) {
  std::optional<double> prev_t, prev_e, t0, e0, t1, e1;
  for (const auto& x : samples) {
    if (!x || !x->energy_mj || !x->t_s) continue;
    if (prev_e && *x->energy_mj > *prev_e) {
      const double t = 0.5 * (*prev_t + *x->t_s);
      if (!t0) {
        t0 = t, e0 = *x->energy_mj;
      } else {
        t1 = t, e1 = *x->energy_mj;
      }
    }
    prev_t = x->t_s, prev_e = x->energy_mj;
  }
  if (!t1 || *t1 <= *t0) return std::nullopt;
  return (*e1 - *e0) / 1e3 / (*t1 - *t0);
}

inline SampleStats aggregate_samples(const std::vector<std::optional<Sample>>& samples) {
  SampleStats out;
  auto agg = [&](auto field, std::optional<double>& m, std::optional<double>& lo, std::optional<double>& hi) {
    double s = 0;
    int n = 0;
    for (const auto& x : samples) {
      if (!x || !((*x).*field)) continue;
      const double v = *((*x).*field);
      s += v, ++n;
      lo = lo ? std::min(*lo, v) : v;
      hi = hi ? std::max(*hi, v) : v;
    }
    if (n) m = s / n;
  };
  agg(&Sample::sm_clock_mhz, out.sm_clock_mhz, out.sm_clock_mhz_min, out.sm_clock_mhz_max);
  agg(&Sample::power_w, out.power_w, out.power_w_min, out.power_w_max);
  agg(&Sample::temp_c, out.temp_c, out.temp_c_min, out.temp_c_max);
  for (const auto& x : samples) out.nvml_samples += x.has_value();
  out.energy_w = counter_power_w(samples);
  return out;
}

// One timed block (JSON: the same field names as the Python protocol's blocks).
struct Block {
  int index = 0, round = 0;
  Half half = Half::kFirst;
  std::string backend;
  long warmup_calls = 0;
  double warmup_s = 0;
  long calls = 0;
  double block_ms = 0, per_call_ms = 0;
  std::optional<double> host_ms_per_call;
  bool host_bound = false;
  SampleStats nvml;
  std::optional<double> energy_j;    // nvml.energy_w x block_ms: the block's energy at the counter's mean power
  std::optional<double> j_per_call;  // energy_j / calls
};

struct BackendStats {
  int blocks = 0;
  std::optional<double> median_ms, min_ms, max_ms, spread;
  std::optional<double> median_ms_first_half, median_ms_second_half;
  std::optional<double> sm_clock_mhz, power_w, temp_c;
  int host_bound_blocks = 0;
  std::optional<double> j_per_call;  // median over the blocks that measured energy
};

inline BackendStats backend_stats(const std::vector<Block>& blocks, const std::string& name) {
  BackendStats s;
  std::vector<double> all, first, second;
  std::vector<std::optional<double>> clock, power, temp;
  std::vector<double> energy;
  for (const auto& b : blocks) {
    if (b.backend != name) continue;
    ++s.blocks;
    if (b.j_per_call) energy.push_back(*b.j_per_call);
    all.push_back(b.per_call_ms);
    (b.half == Half::kFirst ? first : second).push_back(b.per_call_ms);
    clock.push_back(b.nvml.sm_clock_mhz);
    power.push_back(b.nvml.power_w);
    temp.push_back(b.nvml.temp_c);
    s.host_bound_blocks += b.host_bound;
  }
  s.median_ms = median(all);
  if (!all.empty()) {
    s.min_ms = *std::min_element(all.begin(), all.end());
    s.max_ms = *std::max_element(all.begin(), all.end());
    s.spread = div_opt(*s.max_ms - *s.min_ms, s.median_ms);
  }
  s.median_ms_first_half = median(first);
  s.median_ms_second_half = median(second);
  s.sm_clock_mhz = mean(clock);
  s.power_w = mean(power);
  s.temp_c = mean(temp);
  s.j_per_call = median(energy);
  return s;
}

struct Ratio {
  std::optional<double> ratio, ratio_first_half, ratio_second_half, order_gap;
  std::optional<bool> flipped;
};

// How many times faster `a` is than `ref` (ref time / a time), over all blocks and per half.
inline Ratio ratio(const BackendStats& a, const BackendStats& ref) {
  Ratio r;
  r.ratio = div_opt(ref.median_ms, a.median_ms);
  r.ratio_first_half = div_opt(ref.median_ms_first_half, a.median_ms_first_half);
  r.ratio_second_half = div_opt(ref.median_ms_second_half, a.median_ms_second_half);
  if (r.ratio_first_half && r.ratio_second_half) {
    r.flipped = (*r.ratio_first_half - 1.0) * (*r.ratio_second_half - 1.0) < 0;
    r.order_gap = div_opt(*r.ratio_first_half - *r.ratio_second_half, r.ratio);
  }
  return r;
}

// printf's %g, as Python's format(x, 'g').
inline std::string fmt_g(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

inline std::string protocol_string(double warmup_s, double block_s, int rounds, const std::string& timer, int n_inputs,
                                   long min_calls = kDefaultMinCalls) {
  return std::string(kProtocolName) + ": per block warm-up " + fmt_g(warmup_s) + " s + timed " + fmt_g(block_s) +
         " s (" + timer + "), order forward+reverse x " + std::to_string(rounds) + " rounds (" +
         std::to_string(2 * rounds) + " blocks per backend), " + std::to_string(n_inputs) +
         " input sets rotated, min " + std::to_string(min_calls) + " calls/block, median per-call time";
}

// ----------------------------------------------------------------------------------------------------
// The driver

struct CallTiming {
  double seconds = 0;                 // device time of the calls
  long calls = 0;                     // calls made (a graph timer rounds up to whole replays)
  std::optional<double> host_seconds;  // host time to enqueue them, when known
};

class Timer {
 public:
  virtual ~Timer() = default;
  virtual const char* name() const = 0;
  virtual double now() = 0;  // wall seconds
  // Calls first, first+1, ..., first+calls-1 of `backend` back to back; returns their timing.
  virtual CallTiming time_calls(int backend, long first, long calls) = 0;
  // The warm-up's stop decision. A timer whose calls span ranks (AgreedTimer) returns the same answer on every rank
  // (done only when every rank is), so a time-based warm-up makes the same calls everywhere.
  virtual bool all_done(bool done) { return done; }
};

class Sampler {  // NVML beside a block; nvml.hpp has the real one
 public:
  virtual ~Sampler() = default;
  virtual bool available() const = 0;
  virtual void start() = 0;
  virtual std::vector<std::optional<Sample>> stop() = 0;
};

struct Params {
  double warmup_s = kDefaultWarmupS;
  double block_s = kDefaultBlockS;
  int rounds = kDefaultRounds;
  long min_calls = kDefaultMinCalls;
  long max_calls = kDefaultMaxCalls;
  int n_inputs = 1;  // recorded only: the Timer's calls rotate their inputs
  int nvml_device = 0;  // the CUDA device read beside the blocks (run_protocol_cuda finds it in NVML by PCI bus id)
  // NVML reading period beside a block (run_protocol_cuda's sampler; Python: run_protocol's sample_period_s). The
  // energy estimate places each counter step to within half of it, so power comparisons want it short.
  double sample_period_s = kDefaultSamplePeriodS;
};

struct WarmUp {
  long calls = 0;
  double seconds = 0, per_call_s = 0;
  std::optional<double> host_s_per_call;
};

// Chunks of 1, 2, 4, ... calls (capped by the time left) until `seconds` of wall time have passed.
inline WarmUp warm_up(Timer& timer, int backend, double seconds, long first, long max_calls = kDefaultMaxCalls) {
  WarmUp w;
  const double t0 = timer.now();
  long n = 1;
  for (;;) {
    const CallTiming t = timer.time_calls(backend, first + w.calls, n);
    w.calls += t.calls;
    w.per_call_s = t.seconds / static_cast<double>(t.calls);
    if (t.host_seconds) {
      const double h = *t.host_seconds / static_cast<double>(t.calls);
      w.host_s_per_call = w.host_s_per_call ? std::min(*w.host_s_per_call, h) : h;
    }
    const double left = seconds - (timer.now() - t0);
    if (timer.all_done(left <= 0)) break;
    long by_time = 2 * n;
    if (w.per_call_s > 0) by_time = static_cast<long>(std::min(std::ceil(left / w.per_call_s), 1e15));
    n = std::max(1L, std::min({2 * n, max_calls, by_time}));
  }
  w.seconds = timer.now() - t0;
  return w;
}

struct Result {
  std::string protocol;
  Params params;
  std::string timer;
  bool nvml = false;
  std::vector<std::string> backends;
  std::vector<std::string> order;
  std::vector<Block> blocks;
  std::vector<BackendStats> stats;  // per backend, in backends' order

  const BackendStats& stats_of(const std::string& name) const {
    for (size_t i = 0; i < backends.size(); ++i)
      if (backends[i] == name) return stats[i];
    throw std::out_of_range("no backend " + name);
  }
};

inline Result run_protocol(const std::vector<std::string>& names, Timer& timer, Sampler* sampler, const Params& p,
                           const std::function<void(const Block&)>& log = {}) {
  if (names.empty()) throw std::invalid_argument("run_protocol: no backends");
  Result res;
  res.params = p;
  res.timer = timer.name();
  res.backends = names;
  res.protocol = protocol_string(p.warmup_s, p.block_s, p.rounds, res.timer, p.n_inputs, p.min_calls);
  res.nvml = sampler && sampler->available();
  std::vector<long> counter(names.size(), 0);
  const auto order = block_order(static_cast<int>(names.size()), p.rounds);
  for (size_t i = 0; i < order.size(); ++i) {
    const Slot s = order[i];
    res.order.push_back(names[s.backend]);
    const WarmUp w = warm_up(timer, s.backend, p.warmup_s, counter[s.backend], p.max_calls);
    counter[s.backend] += w.calls;
    const long n = calls_for_block(p.block_s, w.per_call_s, p.min_calls, p.max_calls);
    const bool sample = sampler && sampler->available();
    if (sample) sampler->start();
    const CallTiming t = timer.time_calls(s.backend, counter[s.backend], n);
    std::vector<std::optional<Sample>> samples;
    if (sample) samples = sampler->stop();
    counter[s.backend] += t.calls;
    Block b;
    b.index = static_cast<int>(i);
    b.round = s.round;
    b.half = s.half;
    b.backend = names[s.backend];
    b.warmup_calls = w.calls;
    b.warmup_s = w.seconds;
    b.calls = t.calls;
    b.block_ms = t.seconds * 1e3;
    b.per_call_ms = b.block_ms / static_cast<double>(t.calls);
    if (w.host_s_per_call) b.host_ms_per_call = *w.host_s_per_call * 1e3;
    b.host_bound = b.host_ms_per_call && *b.host_ms_per_call >= kHostBoundFraction * b.per_call_ms;
    b.nvml = aggregate_samples(samples);
    if (b.nvml.energy_w) {
      b.energy_j = *b.nvml.energy_w * b.block_ms / 1e3;
      b.j_per_call = *b.energy_j / static_cast<double>(t.calls);
    }
    res.blocks.push_back(b);
    if (log) log(b);
  }
  for (const auto& n : names) res.stats.push_back(backend_stats(res.blocks, n));
  return res;
}

}  // namespace xstage::bench
