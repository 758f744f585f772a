// The measuring loop (Bench::run), burst statistics, anchors and the CSV writer.
#include "calib.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "burst.cuh"
#include "xstage/common/error.hpp"
#include "xstage/runtime/comm.hpp"

namespace xstage::bench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Path parse_path(const std::string& s) {
  XSTAGE_REQUIRE(s == "st" || s == "tma", "path must be st or tma, got '", s, "'");
  return s == "st" ? Path::St : Path::Tma;
}
Pattern parse_pattern(const std::string& s) {
  XSTAGE_REQUIRE(s == "p2p" || s == "a2a", "pattern must be p2p or a2a, got '", s, "'");
  return s == "p2p" ? Pattern::P2P : Pattern::A2A;
}

}  // namespace

Result burst_stats(const std::vector<uint64_t>& st, int bursts, int K, const std::vector<bool>& active, bool periodic,
                   int warm, int tail, double clk_ghz) {
  XSTAGE_REQUIRE(warm >= 0 && tail >= 0, "burst_stats: need warm, tail >= 0, got ", warm, ", ", tail);
  XSTAGE_REQUIRE(periodic ? bursts - 1 - tail > warm : bursts > warm, "burst_stats: ", bursts,
                 " bursts leave no steady window after ", warm, " warm-up", periodic ? " and " : "",
                 periodic ? std::to_string(tail) + " tail bursts" : std::string());
  XSTAGE_REQUIRE(st.size() >= static_cast<size_t>(bursts) * K * 4, "burst_stats: stamp buffer too small");
  XSTAGE_REQUIRE(clk_ghz > 0, "burst_stats: clock must be > 0 GHz, got ", clk_ghz);
  auto at = [&](int b, int p) { return &st[(static_cast<size_t>(b) * K + p) * 4]; };
  std::vector<int> prods;
  for (int p = 0; p < K; ++p)
    if (active[p]) prods.push_back(p);
  XSTAGE_REQUIRE(!prods.empty(), "burst_stats: no active producer");
  // %globaltimer is ~1.8e18 ns: as a double it would be quantized to 256 ns, so subtract a base first.
  uint64_t base = ~uint64_t(0);
  for (int b = 0; b < bursts; ++b)
    for (int p : prods) base = std::min(base, at(b, p)[0]);
  auto start = [&](int b, int p) { return static_cast<double>(at(b, p)[0] - base); };
  auto span = [&](int b, int p) { return static_cast<double>(at(b, p)[3] - at(b, p)[2]) / clk_ghz; };
  // Per burst index: first start and last end across producers (end = start + exact clock64 span).
  std::vector<double> first_start(bursts), agg_span(bursts);
  for (int b = 0; b < bursts; ++b) {
    double s_min = std::numeric_limits<double>::infinity(), e_max = -s_min;
    for (int p : prods) {
      s_min = std::min(s_min, start(b, p));
      e_max = std::max(e_max, start(b, p) + span(b, p));
    }
    first_start[b] = s_min;
    agg_span[b] = e_max - s_min;
  }
  Result r;
  r.tiss_first_ns = agg_span[0];
  if (!periodic) {
    std::vector<double> tiss(agg_span.begin() + warm, agg_span.end()), gaps;
    for (int b = warm + 1; b < bursts; ++b) gaps.push_back(first_start[b] - (first_start[b - 1] + agg_span[b - 1]));
    r.tiss_ns = r.tiss_span_ns = median(tiss);
    r.period_ns = bursts - 1 > warm ? (first_start[bursts - 1] - first_start[warm]) / (bursts - 1 - warm) : 0;
    r.gap_meas_ns = median(gaps);
    std::vector<double> med;
    for (int p : prods) {
      std::vector<double> v;
      for (int b = warm; b < bursts; ++b) v.push_back(span(b, p));
      med.push_back(median(v));
    }
    r.tiss_prod_med_ns = median(med);
    r.steady_bursts = bursts - warm;
    return r;
  }
  // Periodic: the steady window on the common clock (every producer past warm-up, none in its tail).
  const int last_idx = bursts - 1 - tail;
  double t_a = -std::numeric_limits<double>::infinity(), t_b = -t_a;
  for (int p : prods) {
    t_a = std::max(t_a, start(warm, p));
    t_b = std::min(t_b, start(last_idx, p));
  }
  double inv_sum = 0, gap_rate_sum = 0, p_min = std::numeric_limits<double>::infinity(), p_max = 0;
  int steady = std::numeric_limits<int>::max();
  std::vector<double> med_spans;
  for (int p : prods) {
    int lo = warm, hi = last_idx;  // bursts of p that start inside [t_a, t_b]
    while (lo <= last_idx && start(lo, p) < t_a) ++lo;
    while (hi >= warm && start(hi, p) > t_b) --hi;
    steady = std::min(steady, std::max(0, hi - lo + 1));
    if (hi - lo < 1) lo = warm, hi = last_idx;  // drifted out of the common window: its own steady bursts
    const uint64_t* s_lo = at(lo, p);
    const uint64_t* s_hi = at(hi, p);
    const double P = static_cast<double>(s_hi[2] - s_lo[2]) / clk_ghz / (hi - lo);
    double g = 0;
    std::vector<double> spans;
    for (int b = lo; b < hi; ++b) {
      g += static_cast<double>(at(b + 1, p)[2] - at(b, p)[3]) / clk_ghz;
      spans.push_back(span(b, p));
    }
    XSTAGE_CHECK(P > 0, "burst_stats: producer ", p, " has a non-increasing clock64 over its bursts");
    inv_sum += 1 / P;
    gap_rate_sum += g / (hi - lo) / P;
    p_min = std::min(p_min, P);
    p_max = std::max(p_max, P);
    med_spans.push_back(median(spans));
  }
  const double n = static_cast<double>(prods.size());
  r.period_ns = n / inv_sum;  // harmonic mean: V / period = sum_i B / P_i
  // Mean gap over the bursts issued (producer i weighted by its burst rate 1/P_i): then
  // period = T_iss + G holds with T_iss the same rate-weighted mean of the spans (>= 0).
  r.gap_meas_ns = gap_rate_sum / inv_sum;
  r.tiss_ns = r.period_ns - r.gap_meas_ns;
  r.tiss_span_ns = median(std::vector<double>(agg_span.begin() + warm, agg_span.begin() + last_idx + 1));
  r.tiss_prod_med_ns = median(med_spans);
  r.period_spread = p_max / p_min;
  r.steady_bursts = steady;
  return r;
}

std::vector<int> k_sweep(int sm_count) {
  XSTAGE_REQUIRE(sm_count >= 1, "SM count must be >= 1, got ", sm_count);
  std::vector<int> ks;
  for (int d : {4, 2, 1}) {
    int k = std::max(1, (sm_count + d / 2) / d);
    if (ks.empty() || ks.back() != k) ks.push_back(k);
  }
  return ks;
}

struct Bench::Impl {
  runtime::Communicator& comm;
  Options opt;
  std::unique_ptr<runtime::SymmetricWindow> win;
  uint64_t* stamps = nullptr;
  std::vector<uint64_t> host_stamps;
  unsigned long long* wrong = nullptr;
  runtime::DeviceError* err = nullptr;  // device memory, copied back after every run
  uint32_t* arrive = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  int max_K = 0;
  explicit Impl(runtime::Communicator& c, const Options& o) : comm(c), opt(o) {}
  void check(cudaError_t e, const char* what) { runtime::check_cuda(e, what, comm.rank()); }
  void check_device_error(const std::string& what) {
    runtime::DeviceError e{};
    check(cudaMemcpy(&e, err, sizeof e, cudaMemcpyDeviceToHost), "cudaMemcpy device error");
    if (e.code != int(runtime::DeviceErrorCode::kNone))
      throw RuntimeError(detail::concat(what, ": ", runtime::describe(e)));
  }
};

Bench::Bench(runtime::Communicator& comm, const Options& opt) : impl_(std::make_unique<Impl>(comm, opt)) {
  auto& I = *impl_;
  XSTAGE_REQUIRE(comm.size() >= 2, "the remote-store benchmarks need at least 2 ranks, got world size ",
                 comm.size());
  XSTAGE_REQUIRE(opt.threads >= 32 && opt.threads % 32 == 0 && opt.threads <= 1024,
                 "threads per CTA must be a multiple of 32 in [32, 1024], got ", opt.threads);
  XSTAGE_REQUIRE(opt.runs >= 1, "runs must be >= 1, got ", opt.runs);
  cudaDeviceProp prop{};
  I.check(cudaGetDeviceProperties(&prop, comm.device()), "cudaGetDeviceProperties");
  // The sweep is built from the smallest SM count in the job, so every rank runs the same configs.
  sm_count_ = static_cast<int>(comm.allreduce(static_cast<long long>(prop.multiProcessorCount), ncclMin));
  device_name_ = prop.name;
  I.max_K = 4 * sm_count_;  // warp producers: up to 4 per SM
  I.check(cudaMalloc(&I.stamps, static_cast<size_t>(opt.max_bursts) * I.max_K * 4 * sizeof(uint64_t)), "cudaMalloc stamps");
  I.host_stamps.resize(static_cast<size_t>(opt.max_bursts) * I.max_K * 4);
  I.check(cudaMalloc(&I.wrong, sizeof(unsigned long long)), "cudaMalloc wrong");
  I.check(cudaMalloc(&I.err, sizeof(runtime::DeviceError)), "cudaMalloc error record");
  I.check(cudaMemset(I.err, 0, sizeof(runtime::DeviceError)), "cudaMemset");
  I.check(cudaMalloc(&I.arrive, opt.max_bursts * sizeof(uint32_t)), "cudaMalloc arrive");
  I.check(cudaEventCreate(&I.ev0), "cudaEventCreate");
  I.check(cudaEventCreate(&I.ev1), "cudaEventCreate");
  I.win = std::make_unique<runtime::SymmetricWindow>(comm, opt.max_window, "burst destination");

  // SM clock: cycles per ns of %globaltimer over ~20 ms of spin (gap G is a cycle count).
  uint64_t* probe = nullptr;
  I.check(cudaMalloc(&probe, 4 * sizeof(uint64_t)), "cudaMalloc probe");
  uint64_t h[4];
  for (int i = 0; i < 2; ++i) {  // first run warms the clock up
    launch_clock_probe(probe, 40'000'000ull, comm.stream());
    I.check(cudaGetLastError(), "clock probe launch");
    I.check(cudaMemcpyAsync(h, probe, sizeof h, cudaMemcpyDeviceToHost, comm.stream()), "cudaMemcpyAsync");
    comm.sync("clock probe kernel");
  }
  cudaFree(probe);
  clk_ghz_ = static_cast<double>(h[3] - h[1]) / static_cast<double>(h[2] - h[0]);
  XSTAGE_CHECK(clk_ghz_ > 0.1 && clk_ghz_ < 10, "rank ", comm.rank(), ": implausible SM clock ", clk_ghz_, " GHz");
}

Bench::~Bench() {
  auto& I = *impl_;
  cudaFree(I.stamps);
  cudaFree(I.wrong);
  cudaFree(I.err);
  cudaFree(I.arrive);
  cudaEventDestroy(I.ev0);
  cudaEventDestroy(I.ev1);
}

int Bench::world() const { return impl_->comm.size(); }
int Bench::rank() const { return impl_->comm.rank(); }

Result Bench::run(const Config& c) {
  auto& I = *impl_;
  auto& comm = I.comm;
  const int P = comm.size();
  const Path path = parse_path(c.path);
  const Pattern pattern = parse_pattern(c.pattern);
  XSTAGE_REQUIRE(c.mode == "zerogap" || c.mode == "gap" || c.mode == "isolated",
                 "mode must be zerogap, gap or isolated, got '", c.mode, "'");
  XSTAGE_REQUIRE(c.producer == "cta" || c.producer == "warp", "producer must be cta or warp, got '", c.producer, "'");
  const bool warp = c.producer == "warp";
  XSTAGE_REQUIRE(!(warp && path == Path::Tma), "TMA bulk stores are issued per CTA; producer=warp needs path=st");
  XSTAGE_REQUIRE(c.K >= 1 && c.K <= (warp ? I.max_K : sm_count_), "K = ", c.K, " must be in [1, ",
                 warp ? I.max_K : sm_count_, "] for ", c.producer, " producers");
  XSTAGE_REQUIRE(c.B >= 16 && c.B % 16 == 0, "B must be a positive multiple of 16 bytes, got ", c.B);
  XSTAGE_REQUIRE(c.bursts >= 2 && c.bursts <= I.opt.max_bursts, "bursts must be in [2, ", I.opt.max_bursts, "], got ", c.bursts);
  XSTAGE_REQUIRE(c.gap_ns >= 0, "gap must be >= 0 ns, got ", c.gap_ns);
  XSTAGE_REQUIRE(c.src >= 0 && c.src < P && c.dst >= 0 && c.dst < P && c.src != c.dst, "p2p pair ", c.src,
                 " -> ", c.dst, " must be two distinct ranks in [0, ", P, ")");
  const size_t need = static_cast<size_t>(P) * c.K * c.B;
  XSTAGE_REQUIRE(need <= I.win->bytes(), "config needs ", need, " bytes of window, have ", I.win->bytes());

  BurstParams p{};
  p.dev = comm.dev();
  p.win = I.win->window();
  p.rank = comm.rank();
  p.nranks = P;
  p.K = c.K;
  p.B = c.B;
  p.bursts = c.bursts;
  p.gap_cycles = static_cast<uint64_t>(std::llround(c.gap_ns * clk_ghz_));
  p.pattern = pattern;
  p.src = c.src;
  p.dst = c.dst;
  p.local = c.local;
  // TMA stages at most 32 KB per CTA in shared memory; the fill pattern repeats with that period.
  p.period_bytes = path == Path::Tma ? std::min<uint32_t>(c.B, 32768) : c.B;
  p.stamps = I.stamps;
  // Isolated bursts are re-aligned before every burst (after a full recovery); periodic ones run free.
  p.align_bursts = c.mode == "isolated";
  p.err = I.err;
  p.arrive = I.arrive;
  p.timeout_ns = static_cast<uint64_t>(I.opt.timeout_s * 1e9);
  const int threads = warp ? 128 : I.opt.threads;
  const int grid = warp ? (c.K + 3) / 4 : c.K;
  XSTAGE_CHECK(grid <= 4 * sm_count_, "grid ", grid, " exceeds the LSA barrier slots");

  std::vector<bool> active(c.K);
  bool sender = false;
  for (int q = 0; q < c.K; ++q) {
    active[q] = target_of(comm.rank(), q, pattern, c.src, c.dst, c.local, P) >= 0;
    sender |= active[q];
    p.active += active[q];
  }
  // Steady state of periodic bursts: skip a few warm-up bursts (the X-Stage fills up within ~2)
  // and the tail (producers that finish early leave the drain to the others). Few, because unfair
  // service spreads the producers' rates (measured: up to 4x at G = 0) and the window must keep
  // every producer active. Isolated: skip burst 0.
  const bool periodic = c.mode != "isolated";
  const int warm = periodic ? c.bursts / 16 : 1, tail = periodic ? c.bursts / 32 : 0;
  std::vector<Result> runs;
  long long wrong = 0;
  for (int run = 0; run <= I.opt.runs; ++run) {  // run 0 is the warm-up
    I.check(cudaMemsetAsync(I.win->local(), 0, need, comm.stream()), "cudaMemsetAsync poison");
    I.check(cudaMemsetAsync(I.wrong, 0, sizeof(unsigned long long), comm.stream()), "cudaMemsetAsync");
    I.check(cudaMemsetAsync(I.arrive, 0, c.bursts * sizeof(uint32_t), comm.stream()), "cudaMemsetAsync");
    comm.sync("poisoning the destination window");
    comm.barrier();  // no peer stores into a window that is still being poisoned
    I.check(cudaEventRecord(I.ev0, comm.stream()), "cudaEventRecord");
    launch_burst(p, path, warp, threads, comm.stream());
    I.check(cudaGetLastError(), "burst kernel launch");
    I.check(cudaEventRecord(I.ev1, comm.stream()), "cudaEventRecord");
    launch_verify(p, I.wrong, comm.stream());
    I.check(cudaGetLastError(), "verify kernel launch");
    unsigned long long w = 0;
    I.check(cudaMemcpyAsync(&w, I.wrong, sizeof w, cudaMemcpyDeviceToHost, comm.stream()), "cudaMemcpyAsync");
    comm.sync("the burst kernel (" + c.mode + " K=" + std::to_string(c.K) + " B=" + std::to_string(c.B) + ")");
    I.check_device_error("burst kernel");
    if (run == 0) continue;
    wrong += static_cast<long long>(w);
    Result r;
    if (sender) {
      I.check(cudaMemcpy(I.host_stamps.data(), I.stamps, static_cast<size_t>(c.bursts) * c.K * 4 * sizeof(uint64_t),
                         cudaMemcpyDeviceToHost), "cudaMemcpy stamps");
      r = burst_stats(I.host_stamps, c.bursts, c.K, active, periodic, warm, tail, clk_ghz_);
      if (!c.dump.empty() && run == 1 && comm.rank() == 0) {
        std::ofstream f(c.dump, std::ios::app);
        for (int b = 0; b < c.bursts; ++b)
          for (int q = 0; q < c.K; ++q) {
            if (!active[q]) continue;
            const uint64_t* s = &I.host_stamps[(static_cast<size_t>(b) * c.K + q) * 4];
            f << c.mode << ',' << c.path << ',' << c.pattern << ',' << c.producer << ',' << c.K << ',' << c.B << ','
              << c.gap_ns << ',' << comm.rank() << ',' << b << ',' << q << ',' << s[0] << ',' << s[1] << ','
              << s[2] << ',' << s[3] << '\n';
          }
      }
    }
    float ms = 0;
    I.check(cudaEventElapsedTime(&ms, I.ev0, I.ev1), "cudaEventElapsedTime");
    r.wall_us = sender ? ms * 1e3 : 0;
    runs.push_back(r);
  }
  // Median over runs, then the slowest sending rank (a2a) / the single sender (p2p).
  auto med = [&](double Result::*f) {
    std::vector<double> v;
    for (auto& r : runs) v.push_back(r.*f);
    return comm.allreduce(median(v), ncclMax);
  };
  Result out;
  out.period_ns = med(&Result::period_ns);
  out.wall_us = med(&Result::wall_us);
  if (periodic) {
    // T_iss = period - G of one rank (the slowest sender): take G from the rank whose period won.
    std::vector<double> v;
    for (auto& r : runs) v.push_back(r.period_ns);
    const bool mine = sender && median(v) == out.period_ns;
    v.clear();
    for (auto& r : runs) v.push_back(r.gap_meas_ns);
    out.gap_meas_ns = comm.allreduce(mine ? median(v) : -std::numeric_limits<double>::infinity(), ncclMax);
    out.tiss_ns = out.period_ns - out.gap_meas_ns;
  } else {
    out.tiss_ns = med(&Result::tiss_ns);
    out.gap_meas_ns = med(&Result::gap_meas_ns);
  }
  out.tiss_first_ns = med(&Result::tiss_first_ns);
  out.tiss_span_ns = med(&Result::tiss_span_ns);
  out.tiss_prod_med_ns = med(&Result::tiss_prod_med_ns);
  out.period_spread = med(&Result::period_spread);
  {
    // The fewest steady bursts of any producer in any run of any sending rank (0 or 1: some
    // producer drifted out of the common window).
    double lo = 1e9;
    for (auto& r : runs)
      if (sender) lo = std::min(lo, static_cast<double>(r.steady_bursts));
    out.steady_bursts = static_cast<int>(comm.allreduce(lo, ncclMin));
  }
  out.wrong = comm.allreduce(wrong, ncclSum);
  return out;
}

namespace {
// One anchor measurement from rank src into rank dst's symmetric window: `measure(to, from)` returns
// GB/s on the source rank; every rank joins the reductions even when the source failed.
template <class Measure>
double anchor_GBps(runtime::Communicator& comm, const char* what, size_t bytes, int src, int dst, int fill,
                   Measure&& measure) {
  auto check = [&](cudaError_t e, const char* call) { runtime::check_cuda(e, call, comm.rank()); };
  runtime::SymmetricWindow w(comm, bytes, what);
  void* from = nullptr;
  check(cudaMalloc(&from, bytes), "cudaMalloc");
  check(cudaMemset(from, fill, bytes), "cudaMemset");
  double best = 0;
  std::string failure;
  if (comm.rank() == src) try {
    void** dptr = nullptr;
    void* to = nullptr;
    check(cudaMalloc(&dptr, sizeof(void*)), "cudaMalloc");
    launch_peer_pointer(w.window(), dst, dptr, comm.stream());
    check(cudaMemcpyAsync(&to, dptr, sizeof to, cudaMemcpyDeviceToHost, comm.stream()), "cudaMemcpyAsync");
    comm.sync("peer pointer kernel");
    cudaFree(dptr);
    best = measure(to, from);
  } catch (const std::exception& e) {
    failure = e.what();
    best = -1;
  }
  cudaFree(from);
  best = comm.allreduce(best, ncclMin) < 0 ? -1 : comm.allreduce(best, ncclMax);
  XSTAGE_CHECK(best >= 0, what, " failed on rank ", src, failure.empty() ? "" : ": ", failure);
  return best;
}

// Median GB/s over timed repetitions (the first is a warm-up) of `launch` between two events.
template <class Launch>
double timed_GBps(runtime::Communicator& comm, cudaEvent_t ev0, cudaEvent_t ev1, size_t bytes, int reps,
                  const char* what, Launch&& launch) {
  auto check = [&](cudaError_t e, const char* call) { runtime::check_cuda(e, call, comm.rank()); };
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(ev0, comm.stream()), "cudaEventRecord");
    launch();
    check(cudaEventRecord(ev1, comm.stream()), "cudaEventRecord");
    comm.sync(what);
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ev0, ev1), "cudaEventElapsedTime");
    if (i > 0) t.push_back(bytes / (ms * 1e-3) / 1e9);
  }
  return median(t);
}
}  // namespace

double Bench::copy_engine_GBps(size_t bytes, int src, int dst) {
  auto& I = *impl_;
  return anchor_GBps(I.comm, "copy-engine anchor", bytes, src, dst, 0x5a, [&](void* to, void* from) {
    return timed_GBps(I.comm, I.ev0, I.ev1, bytes, 6, "copy-engine anchor", [&] {
      I.check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, I.comm.stream()),
              "cudaMemcpyAsync to the peer's window (copy engine)");
    });
  });
}

double Bench::sm_copy_GBps(size_t bytes, int src, int dst) {
  auto& I = *impl_;
  return anchor_GBps(I.comm, "SM-copy anchor", bytes, src, dst, 0x3c, [&](void* to, void* from) {
    double best = 0;
    for (int mult : {1, 2, 4})  // CTAs per SM: the best of three grid sizes
      best = std::max(best, timed_GBps(I.comm, I.ev0, I.ev1, bytes, 4, "SM-copy anchor", [&] {
        launch_sm_copy(to, from, bytes, mult * sm_count_, 512, I.comm.stream());
        I.check(cudaGetLastError(), "SM copy launch");
      }));
    return best;
  });
}

model::Sample to_sample(const Config& c, const Result& r) {
  model::Sample s;
  s.mode = c.mode;
  s.target = c.local ? "local" : "remote";
  s.K = c.K;
  s.B = c.B;
  s.V = static_cast<double>(c.K) * c.B;
  // G is the measured producer-side gap (mean end of a burst -> start of the next; no barrier in it).
  s.gap_ns = c.mode == "gap" ? r.gap_meas_ns : 0;
  s.tiss_ns = r.tiss_ns;
  s.period_ns = c.mode == "isolated" ? 0 : r.period_ns;
  s.wall_us = r.wall_us;
  s.bursts = c.bursts;
  s.path = c.path;
  s.pattern = c.pattern;
  s.producer = c.producer;
  s.wrong = r.wrong;
  return s;
}

void write_csv(const std::string& path, const std::vector<Config>& cs, const std::vector<Result>& rs, int world,
               int threads) {
  std::ofstream f(path);
  XSTAGE_CHECK(f.good(), "cannot write ", path);
  f << "mode,target,K,B,V,gap_ns,tiss_ns,period_ns,wall_us,bursts,path,pattern,producer,wrong,"
       "gap_req_ns,gap_rec_ns,tiss_first_ns,src,dst,world,threads,tiss_span_ns,tiss_prod_med_ns,period_spread,"
       "steady_bursts\n";
  char buf[640];
  for (size_t i = 0; i < cs.size(); ++i) {
    const Config& c = cs[i];
    const Result& r = rs[i];
    model::Sample s = to_sample(c, r);
    std::snprintf(buf, sizeof buf, "%s,%s,%d,%.0f,%.0f,%.1f,%.1f,%.1f,%.2f,%d,%s,%s,%s,%lld,%.1f,%.1f,%.1f,%d,%d,%d,%d,%.1f,%.1f,%.3f,%d\n",
                  s.mode.c_str(), s.target.c_str(), s.K, s.B, s.V, s.gap_ns, s.tiss_ns, s.period_ns, s.wall_us,
                  s.bursts, s.path.c_str(), s.pattern.c_str(), s.producer.c_str(), s.wrong,
                  c.mode == "gap" ? c.gap_ns : 0.0,
                  c.mode == "isolated" ? c.gap_ns : 0.0, r.tiss_first_ns, c.pattern == "p2p" ? c.src : -1,
                  c.pattern == "p2p" ? c.dst : -1, world, c.producer == "warp" ? 128 : threads, r.tiss_span_ns,
                  r.tiss_prod_med_ns, r.period_spread, r.steady_bursts);
    f << buf;
  }
  XSTAGE_CHECK(f.good(), "error writing ", path);
}

}  // namespace xstage::bench
