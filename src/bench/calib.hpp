#pragma once
// Remote-store microbenchmarks (SPEC §4), nvbandwidth-style: each test case is a class with a key,
// a description and a skip rule that lists its configurations; Bench::run is the one measuring loop
// (warm-up, timed runs, destination check, cross-rank reduction).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xstage/model/fit.hpp"

namespace xstage::runtime {
class Communicator;
}

namespace xstage::bench {

struct Config {
  std::string mode = "gap";     // zerogap | gap | isolated
  bool local = false;           // local-memory control (same kernel, own window as destination)
  std::string path = "st";      // st | tma
  std::string pattern = "p2p";  // p2p (src -> dst) | a2a (every rank to every peer)
  std::string producer = "cta"; // cta | warp
  int K = 0;                    // producers
  uint32_t B = 0;               // bytes per producer per burst
  double gap_ns = 0;            // requested G (isolated: the recovery gap between bursts)
  int bursts = 64;
  int src = 0, dst = 1;         // p2p pair
  std::string dump;             // non-empty: rank 0 appends this run's raw stamps to the file (diagnostics)
};

struct Result {
  // Aggregate figures (the fit reads these): T_iss, period, measured gap G, kernel wall time.
  double tiss_ns = 0, period_ns = 0, wall_us = 0, gap_meas_ns = 0;
  // Diagnostics: aggregate span of burst 0 (aligned by the initial barrier); per burst index, first
  // start -> last end across producers (median over the steady bursts); median over producers of
  // each producer's median span; slowest / fastest producer period; fewest steady bursts of a producer.
  double tiss_first_ns = 0, tiss_span_ns = 0, tiss_prod_med_ns = 0, period_spread = 1;
  int steady_bursts = 0;
  long long wrong = 0;
};

// Burst statistics from one rank's stamps ([bursts][K][4]: gt start, gt end, clk start, clk end) of
// the producers with active[p]. A producer's durations come from clock64 (cycles / clk_ghz, exact
// within its SM); %globaltimer (common to all SMs) places them on one clock.
//
// periodic (zerogap, gap; producers run free after the initial barrier): the steady window is the
// common-clock interval in which every producer is past its first `warm` bursts and before its last
// `tail` bursts: [max_i start_i(warm), min_i start_i(bursts-1-tail)]. Per producer i, P_i = mean
// start-to-start period of its bursts that start in the window, gap_i = mean end -> next start.
// Aggregate period = harmonic mean of the P_i (sum_i B/P_i is the aggregate issue rate, = V/period),
// gap = mean of the gap_i weighted by burst rate 1/P_i (the mean over the bursts issued), T_iss =
// period - gap (= the rate-weighted mean span). A producer with fewer than 2 bursts in the window
// (drifted far) uses its own bursts [warm, bursts-1-tail] instead; steady_bursts = 0 or 1 flags it.
//
// aligned (isolated: every burst starts together): T_iss = median over bursts [warm, bursts) of
// last end - first start; period = mean start-to-start of the first starts; gap = median last end ->
// next first start.
Result burst_stats(const std::vector<uint64_t>& stamps, int bursts, int K, const std::vector<bool>& active,
                   bool periodic, int warm, int tail, double clk_ghz);

// Producers: CTAs (blockDim = threads) or warps (4 per CTA); the sweep's K values from the SM count.
std::vector<int> k_sweep(int sm_count);  // {SMs/4, SMs/2, SMs}, rounded, distinct, >= 1

class Bench {
 public:
  struct Options {
    int threads = 512;          // per CTA producer
    int runs = 3;               // timed runs per configuration (after one warm-up run)
    double timeout_s = 20;      // device spin-waits and host waits
    size_t max_window = 0;      // bytes per rank of the burst window (>= P*K*B of every config)
    int max_bursts = 64;
  };
  Bench(runtime::Communicator& comm, const Options& opt);
  ~Bench();
  int sm_count() const { return sm_count_; }
  double clock_ghz() const { return clk_ghz_; }
  int world() const;
  int rank() const;
  // Collective: every rank calls it with the same config. Throws UsageError for a config that
  // does not fit (names the field), RuntimeError on a device timeout.
  Result run(const Config& c);
  // Anchors (rank src -> dst), collective: GB/s = 1e9 bytes/s.
  double copy_engine_GBps(size_t bytes, int src, int dst);
  double sm_copy_GBps(size_t bytes, int src, int dst);
  std::string device_name() const { return device_name_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int sm_count_ = 0;
  double clk_ghz_ = 0;
  std::string device_name_;
};

// What a test case sees when it builds its sweep.
struct SweepContext {
  int sm_count = 0, world = 0;
  double R_guess = 0;  // bytes/s from the zero-gap points measured so far (gap grids scale with V/R)
  bool quick = false;  // fewer points (tests)
};

class TestCase {
 public:
  virtual ~TestCase() = default;
  virtual std::string key() const = 0;
  virtual std::string description() const = 0;
  // Empty when runnable here; else why it is skipped.
  virtual std::string skip_reason(const SweepContext& ctx) const = 0;
  virtual std::vector<Config> configs(const SweepContext& ctx) const = 0;
};

std::vector<std::unique_ptr<TestCase>> all_cases();

model::Sample to_sample(const Config& c, const Result& r);
// The raw CSV (fit.hpp schema + bursts, path, pattern, producer, wrong, and extra columns).
void write_csv(const std::string& path, const std::vector<Config>& cs, const std::vector<Result>& rs,
               int world, int threads);

}  // namespace xstage::bench
