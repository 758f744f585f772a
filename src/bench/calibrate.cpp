// The calibration driver (see calibrate.hpp).
#include "calibrate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "calib.hpp"
#include "xstage/common/error.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/fit.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/launcher.hpp"

#ifndef XSTAGE_SOURCE_DIR
#define XSTAGE_SOURCE_DIR "."
#endif

namespace xstage::bench {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> self_cmdline() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return args;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

int visible_gpus() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  return e == cudaSuccess ? n : 0;
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

struct Point {
  Config c;
  Result r;
};

// Jump ratio of the isolated knee rule (model::find_knee, the same as the fit's FitOptions::knee_ratio).
constexpr double kKneeRatio = 1.5;

// What the T_iss^0 at (K, V) of a fitted platform is: a gap plateau of periodic bursts or an isolated
// floor point (with what an aligned burst of that V does), an interpolation, or the last measured point of
// the K row scaled by V (Platform::tiss0).
std::string tiss0_provenance(const model::FitReport& rep, int K, double V) {
  const model::Platform& pl = rep.platform;
  auto row = model::tiss0_row(pl, K);
  char buf[512];
  if (row.empty()) {
    std::snprintf(buf, sizeof buf, "no T_iss^0 row at K = %d: interpolated in K between the measured rows", K);
    return buf;
  }
  for (const auto& t : rep.tiss0_sources)
    if (t.K == K && std::fabs(t.V - V) <= 1e-9 * V) {
      if (t.source == "gap plateau") {
        std::snprintf(buf, sizeof buf,
                      "measured: large-gap plateau of periodic bursts at K = %d, V = %.3f MB (median of %d points; "
                      "the recovered, no-backpressure issue time)%s",
                      K, V / 1e6, t.points,
                      t.aligned_overflow
                          ? "; an aligned (isolated) burst of this V overflows Q, so it issues in (V - Q)/R instead "
                            "(capacity bound), free-running periodic bursts do not form one"
                          : "");
      } else {
        std::snprintf(buf, sizeof buf, "measured: isolated floor (below the knee) at K = %d, V = %.3f MB", K, V / 1e6);
      }
      return buf;
    }
  if (V > row.back().V * (1 + 1e-9)) {
    std::snprintf(buf, sizeof buf,
                  "model value: T_iss^0 at K = %d is measured up to V = %.3f MB (%.3f us); at V = %.3f MB it is "
                  "that point scaled by V (Platform::tiss0)",
                  K, row.back().V / 1e6, row.back().tiss0 * 1e6, V / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "interpolated in V in the T_iss^0 table at K = %d (V = %.3f MB)", K, V / 1e6);
  }
  return buf;
}

// Reads back a calibration.csv written by write_csv.
std::vector<Point> read_points(const std::string& path) {
  std::ifstream f(path);
  XSTAGE_REQUIRE(f.good(), "cannot read ", path);
  std::string line;
  std::getline(f, line);
  auto split = [](const std::string& l) {
    std::vector<std::string> v;
    std::stringstream ss(l);
    std::string x;
    while (std::getline(ss, x, ',')) v.push_back(x);
    return v;
  };
  std::vector<std::string> head = split(line);
  auto col = [&](const std::string& name) {
    auto it = std::find(head.begin(), head.end(), name);
    XSTAGE_REQUIRE(it != head.end(), path, ": column '", name, "' missing (not written by xstage calibrate?)");
    return size_t(it - head.begin());
  };
  const size_t cm = col("mode"), ct = col("target"), cK = col("K"), cB = col("B"), cg = col("gap_ns"),
               cti = col("tiss_ns"), cp = col("period_ns"), cw = col("wall_us"), cb = col("bursts"),
               cpa = col("path"), cpt = col("pattern"), cpr = col("producer"), cwr = col("wrong"),
               cgr = col("gap_req_ns"), cgrec = col("gap_rec_ns"), cf = col("tiss_first_ns"), cs = col("src"),
               cd = col("dst");
  std::vector<Point> pts;
  int n = 1;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    auto v = split(line);
    XSTAGE_REQUIRE(v.size() == head.size(), path, ":", n, ": ", v.size(), " fields, header has ", head.size());
    Point p;
    p.c.mode = v[cm];
    p.c.local = v[ct] == "local";
    p.c.K = std::stoi(v[cK]);
    p.c.B = static_cast<uint32_t>(std::stod(v[cB]));
    p.c.gap_ns = p.c.mode == "gap" ? std::stod(v[cgr]) : std::stod(v[cgrec]);
    p.c.bursts = std::stoi(v[cb]);
    p.c.path = v[cpa];
    p.c.pattern = v[cpt];
    p.c.producer = v[cpr];
    // p2p rows name their pair; a2a rows write -1 (every rank to every peer), kept as the defaults.
    if (p.c.pattern == "p2p") {
      p.c.src = std::stoi(v[cs]);
      p.c.dst = std::stoi(v[cd]);
    }
    p.r.tiss_ns = std::stod(v[cti]);
    p.r.period_ns = std::stod(v[cp]);
    p.r.wall_us = std::stod(v[cw]);
    p.r.gap_meas_ns = p.c.mode == "gap" ? std::stod(v[cg]) : 0;
    p.r.tiss_first_ns = std::stod(v[cf]);
    p.r.wrong = std::stoll(v[cwr]);
    pts.push_back(p);
  }
  return pts;
}

}  // namespace

int report(const std::string& out_dir, const std::vector<Point>& pts, nlohmann::json summary, bool plots);

int launch(int nproc, const std::vector<std::string>& cmd, double timeout_s) {
  XSTAGE_REQUIRE(nproc >= 1, "-n must be >= 1, got ", nproc);
  int gpus = visible_gpus();
  XSTAGE_REQUIRE(nproc <= gpus, "-n ", nproc, " ranks requested but only ", gpus,
                 " GPU(s) are visible (one process per GPU)");
  runtime::LaunchOptions lo;
  lo.nproc = nproc;
  lo.argv = cmd;
  lo.timeout_s = timeout_s;
  return runtime::launch_local(lo, runtime::new_unique_id_hex());
}

int calibrate(const CalibrateOptions& opt) {
  if (opt.list) {
    SweepContext ctx;
    for (auto& tc : all_cases()) std::printf("%-26s %s\n", tc->key().c_str(), tc->description().c_str());
    return 0;
  }
  if (!opt.refit.empty()) {
    // No GPU: fit, validate and plot again from a finished run (its CSV and summary).
    std::ifstream sf(opt.refit + "/summary.json");
    XSTAGE_REQUIRE(sf.good(), "--refit ", opt.refit, ": no summary.json there");
    nlohmann::json summary = nlohmann::json::parse(sf);
    return report(opt.refit, read_points(opt.refit + "/calibration.csv"), summary, opt.plots);
  }
  XSTAGE_REQUIRE(opt.runs >= 1, "--runs must be >= 1, got ", opt.runs);
  XSTAGE_REQUIRE(opt.timeout_s > 0, "--timeout must be > 0 s, got ", opt.timeout_s);
  runtime::LaunchInfo info = runtime::detect_launch(runtime::process_env());
  if (info.launcher == "none") {
    XSTAGE_REQUIRE(opt.nproc >= 2, "calibrate needs at least 2 ranks: pass --nproc N (N >= 2 local GPUs) "
                   "or start it under xstage launch / torchrun / mpirun / srun; got --nproc ", opt.nproc);
    auto args = self_cmdline();
    args[0] = "/proc/self/exe";
    return launch(opt.nproc, args, 0);
  }
  XSTAGE_REQUIRE(info.world_size >= 2, "calibrate needs at least 2 ranks, the launcher started ", info.world_size);
  const auto t_start = std::chrono::steady_clock::now();

  cudaDeviceProp prop{};
  {
    int ndev = 0;
    runtime::check_cuda(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount", info.rank);
    XSTAGE_CHECK(ndev > 0, "rank ", info.rank, ": no CUDA device visible");
    runtime::check_cuda(cudaGetDeviceProperties(&prop, info.local_rank % ndev), "cudaGetDeviceProperties", info.rank);
  }
  runtime::CommOptions co;
  co.timeout_s = opt.timeout_s;
  co.lsa_barriers = 4 * prop.multiProcessorCount;
  runtime::Communicator comm(info, co);
  const int P = comm.size();
  const bool root = comm.rank() == 0;

  Bench::Options bo;
  bo.runs = opt.runs;
  bo.timeout_s = opt.timeout_s;
  // Largest config: P slots x K = SMs CTAs x 128 KB (warps: 4*SMs x 32 KB is the same volume).
  bo.max_window = static_cast<size_t>(P) * prop.multiProcessorCount * 128 * 1024;
  Bench bench(comm, bo);
  const int SMs = bench.sm_count();
  const std::string machine =
      !opt.machine.empty() ? opt.machine : std::to_string(P) + "x " + bench.device_name();
  const std::vector<std::string> argv = self_cmdline();
  const std::string command =
      "xstage calibrate " + join(std::vector<std::string>(argv.begin() + std::min<size_t>(2, argv.size()), argv.end()));
  if (root) {
    std::printf("# xstage calibrate: %d ranks (%s), %d SMs, SM clock %.3f GHz (measured)\n", P, machine.c_str(),
                SMs, bench.clock_ghz());
    std::printf("# K sweep {SMs/4, SMs/2, SMs} = {");
    for (int k : k_sweep(SMs)) std::printf(" %d", k);
    std::printf(" }, %d timed runs per point after one warm-up; spans: clock64 placed on %%globaltimer\n", opt.runs);
  }

  // Anchors first (rank 0 -> rank 1), on an otherwise idle fabric.
  XSTAGE_REQUIRE(opt.anchor_mb >= 1, "--anchor-mb must be >= 1, got ", opt.anchor_mb);
  const size_t anchor_bytes = size_t(opt.anchor_mb) << 20;
  // A failing anchor (e.g. the copy engine refusing the peer mapping) is reported, not fatal.
  auto anchor = [&](const char* name, auto&& f) {
    try {
      return f();
    } catch (const RuntimeError& e) {
      if (root) std::printf("# anchor %s failed: %s\n", name, e.what());
      return 0.0;
    }
  };
  const double ce = anchor("copy engine", [&] { return bench.copy_engine_GBps(anchor_bytes, 0, 1); });
  const double smc = anchor("SM copy", [&] { return bench.sm_copy_GBps(anchor_bytes, 0, 1); });
  if (root) std::printf("# anchors: copy engine (cudaMemcpyAsync to the peer window, %d MB) %.1f GB/s; best SM copy %.1f GB/s\n", opt.anchor_mb, ce, smc);

  SweepContext ctx;
  ctx.sm_count = SMs;
  ctx.world = P;
  ctx.quick = opt.quick;
  std::vector<Point> pts;
  fs::create_directories(opt.out_dir);
  if (root) std::ofstream(opt.out_dir + "/stamps.csv") << "mode,path,pattern,producer,K,B,gap_req_ns,rank,burst,producer_id,gt_start,gt_end,clk_start,clk_end\n";
  if (root)
    std::printf("%-26s %4s %7s %8s %8s %9s %9s %8s %9s %7s\n", "#case", "K", "B(KB)", "V(MB)", "G(us)", "Tiss(us)",
                "Tper(us)", "V/Tper", "wall(us)", "#wrong");
  long long total_wrong = 0;
  for (auto& tc : all_cases()) {
    if (!opt.only.empty() && tc->key().find(opt.only) == std::string::npos) continue;
    // R guess for gap grids and recovery gaps: the zero-gap remote points of the base family so far.
    std::vector<double> rates;
    for (auto& p : pts)
      if (p.c.mode == "zerogap" && !p.c.local && p.c.path == "st" && p.c.pattern == "p2p" && p.c.producer == "cta" &&
          p.r.wall_us > 0)
        rates.push_back(double(p.c.K) * p.c.B * p.c.bursts / (p.r.wall_us * 1e-6));
    ctx.R_guess = rates.empty() ? 0 : *std::max_element(rates.begin(), rates.end());
    if (std::string why = tc->skip_reason(ctx); !why.empty()) {
      if (root) std::printf("# skip %s: %s\n", tc->key().c_str(), why.c_str());
      continue;
    }
    if (root) std::printf("# %s: %s\n", tc->key().c_str(), tc->description().c_str());
    auto configs = tc->configs(ctx);
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      Config c = configs[ci];
      // Raw stamps of the middle point of each case, for inspection (a few MB).
      if (ci == configs.size() / 2) c.dump = opt.out_dir + "/stamps.csv";
      Result r = bench.run(c);
      total_wrong += r.wrong;
      pts.push_back({c, r});
      if (root) {
        const double V = double(c.K) * c.B;
        std::printf("%-26s %4d %7.0f %8.3f %8.2f %9.3f %9.3f %8.1f %9.1f %7lld\n",
                    (tc->key() + (c.local ? "/local" : "")).c_str(), c.K, c.B / 1024.0, V / 1e6,
                    (c.mode == "gap" ? r.gap_meas_ns : 0) / 1e3, r.tiss_ns / 1e3, r.period_ns / 1e3,
                    r.period_ns > 0 && c.mode != "isolated" ? V / r.period_ns : 0.0, r.wall_us, r.wrong);
        std::fflush(stdout);
      }
    }
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (!root) return total_wrong ? 1 : 0;

  // ---- rank 0: files, fit, validation, summary, plots.
  fs::create_directories(opt.out_dir);
  std::vector<Config> cs;
  std::vector<Result> rs;
  for (auto& p : pts) {
    cs.push_back(p.c);
    rs.push_back(p.r);
  }
  const std::string csv = opt.out_dir + "/calibration.csv";
  write_csv(csv, cs, rs, P, bo.threads);
  std::printf("# wrote %s (%zu points, %lld wrong bytes)\n", csv.c_str(), pts.size(), total_wrong);

  nlohmann::json summary;
  summary["machine"] = machine;
  summary["command"] = command;
  summary["date"] = today();
  summary["world_size"] = P;
  summary["sm_count"] = SMs;
  summary["sm_clock_GHz"] = bench.clock_ghz();
  summary["copy_engine_GBps"] = ce;
  summary["sm_copy_GBps"] = smc;
  summary["elapsed_s"] = elapsed;
  return report(opt.out_dir, pts, summary, opt.plots);
}

// Fit, validation, summary and plots from measured points (rank 0 after a run, or --refit).
int report(const std::string& out_dir, const std::vector<Point>& pts, nlohmann::json summary, bool plots) {
  const std::string csv = out_dir + "/calibration.csv";
  const std::string machine = summary.at("machine"), command = summary.at("command");
  const int P = summary.at("world_size"), SMs = summary.at("sm_count");
  const double ce = summary.at("copy_engine_GBps");
  long long total_wrong = 0;
  for (auto& p : pts) total_wrong += p.r.wrong;
  std::vector<model::Sample> samples = model::read_samples_csv(csv);
  model::Provenance prov{machine, summary.at("date"), command, "calibration",
                         "xstage calibrate: R from zero-gap wall time, T_iss^0 from the large-gap plateaus of "
                         "periodic bursts and the isolated floor, Q(K) = largest V - R*T_iss held up to the isolated "
                         "knee (st.global, one source to one peer, CTA producers); docs/MODEL.md section 7"};
  summary["wrong_bytes"] = total_wrong;
  summary["points"] = pts.size();
  summary["line_rate_GBps_note"] = "NV18 NVLink 4 line rate 478 GB/s per direction (PLATFORM.md)";

  nlohmann::json variants = nlohmann::json::array();
  model::FitReport base;
  bool have_base = false;
  for (const char* fam : {"st/p2p/cta", "tma/p2p/cta", "st/a2a/cta", "st/p2p/warp"}) {
    model::FitOptions fo;
    std::string f = fam;
    fo.path = f.substr(0, f.find('/'));
    fo.pattern = f.substr(f.find('/') + 1, 3);
    fo.producer = f.substr(f.rfind('/') + 1);
    fo.name = "calibrated-" + std::to_string(P) + "gpu";
    fo.sm_count = SMs;
    fo.world_size = P;
    nlohmann::json vj;
    vj["family"] = fam;
    // Model-free comparison of the families (also when a fit fails): the zero-gap drain rate from
    // wall time, and the isolated knee at K = SMs (warps: 4 x SMs) by model::find_knee with that wall
    // rate (a jump off the floor or a confirmed drain-paced step); the last V below it.
    const int Kv = fo.producer == "warp" ? 4 * SMs : SMs;
    {
      double r_wall = 0;
      std::vector<std::pair<double, double>> iso;
      for (auto& p : pts) {
        if (p.c.path != fo.path || p.c.pattern != fo.pattern || p.c.producer != fo.producer || p.c.local) continue;
        const double V = double(p.c.K) * p.c.B;
        if (p.c.mode == "zerogap" && p.c.B >= 16384 && p.r.wall_us > 0)
          r_wall = std::max(r_wall, V * p.c.bursts / (p.r.wall_us * 1e-6));
        if (p.c.mode == "isolated" && p.c.K == Kv) iso.push_back({V, p.r.tiss_ns});
      }
      std::sort(iso.begin(), iso.end());
      double below = iso.empty() ? 0 : iso.back().first, knee = 0;
      if (r_wall > 0 && !iso.empty()) {
        std::vector<double> V, T, C(iso.size(), 0.0);
        for (auto& [v, t] : iso) V.push_back(v), T.push_back(t * 1e-9);  // ns -> s
        model::FitOptions ko;
        ko.knee_ratio = kKneeRatio;
        const int k = model::find_knee(V, T, C, r_wall, ko);
        if (k >= 0) knee = V[k], below = k > 0 ? V[k - 1] : 0;
      }
      vj["R_wall_GBps"] = r_wall / 1e9;
      vj["knee_V_MB"] = knee / 1e6;
      vj["last_V_below_knee_MB"] = below / 1e6;
    }
    try {
      model::FitReport rep = model::fit_platform(samples, fo, prov);
      vj["R_GBps"] = rep.platform.R / 1e9;
      vj["K"] = Kv;
      vj["Q_MB"] = rep.platform.Q(Kv) / 1e6;
      vj["T_iss0_us_B32KB"] = rep.platform.tiss0(Kv, double(Kv) * 32768) * 1e6;
      vj["T_iss0_note"] = tiss0_provenance(rep, Kv, double(Kv) * 32768);
      vj["Q_determined"] = false;
      vj["Q_note"] = "no isolated sweep at K = " + std::to_string(Kv) + " (Q interpolated in K)";
      for (const auto& kf : rep.knees)
        if (kf.K == Kv) {
          vj["Q_determined"] = kf.q_determined;
          vj["Q_note"] = kf.note;
          vj["R_iso_GBps"] = kf.R_iso / 1e9;
        }
      const model::KneeCheck kc = model::knee_check(samples, rep.platform, Kv, fo);
      vj["knee_measured_V_MB"] = kc.measured_knee >= 0 ? kc.V[kc.measured_knee] / 1e6 : -1;
      vj["knee_predicted_V_MB"] = kc.predicted_knee >= 0 ? kc.V[kc.predicted_knee] / 1e6 : -1;
      vj["knee_steps_apart"] = kc.steps_apart();
      vj["gap_median_err"] = rep.gap_median_err;
      vj["gap_max_err"] = rep.gap_max_err;
      vj["iso_median_err"] = rep.iso_median_err;
      vj["iso_max_err"] = rep.iso_max_err;
      if (std::string(fam) == "st/p2p/cta") {
        base = rep;
        have_base = true;
      }
    } catch (const UsageError& e) {
      vj["error"] = e.what();
    }
    variants.push_back(vj);
  }
  summary["variants"] = variants;
  // Drain rate of every ordered pair at K = SMs, B = 32 KB (zero gap, wall time).
  nlohmann::json pairs = nlohmann::json::array();
  for (auto& p : pts)
    if (p.c.mode == "zerogap" && !p.c.local && p.c.pattern == "p2p" && p.c.path == "st" && p.c.producer == "cta" &&
        p.c.K == SMs && p.c.B == 32768 && p.r.wall_us > 0)
      pairs.push_back({{"src", p.c.src}, {"dst", p.c.dst},
                       {"R_wall_GBps", double(p.c.K) * p.c.B * p.c.bursts / (p.r.wall_us * 1e-6) / 1e9}});
  summary["pairs"] = pairs;
  int rc = total_wrong ? 1 : 0;
  if (!have_base) {
    summary["error"] = "the base family (st/p2p/cta) could not be fitted";
    std::printf("# FIT FAILED for st/p2p/cta: %s\n", variants[0].value("error", std::string("?")).c_str());
    rc = 1;
  } else {
    const model::Platform& pl = base.platform;
    pl.save(out_dir + "/platform.json");
    {
      std::ofstream f(out_dir + "/fit.json");
      f << base.to_json().dump(2) << "\n";
    }
    {
      std::ofstream f(out_dir + "/validation.csv");
      f << "mode,K,B,V,gap_ns,quantity,measured_ns,predicted_ns,rel_err\n";
      for (auto& e : base.errors)
        f << e.sample.mode << ',' << e.sample.K << ',' << e.sample.B << ',' << e.sample.V << ',' << e.sample.gap_ns
          << ',' << e.quantity << ',' << e.measured * 1e9 << ',' << e.predicted * 1e9 << ',' << e.rel_err << "\n";
    }
    summary["R_GBps"] = pl.R / 1e9;
    summary["T_iss0_us"] = pl.tiss0(SMs, double(SMs) * 32768) * 1e6;
    summary["T_iss0_note"] = tiss0_provenance(base, SMs, double(SMs) * 32768);
    summary["Q_MB"] = pl.Q(SMs) / 1e6;
    summary["Q_lower_bound"] = base.q_lower_bound;
    summary["model_median_err"] = base.gap_period_median_err;
    summary["model_max_err"] = base.gap_period_max_err;
    summary["model_tiss_median_err"] = base.gap_tiss_median_err;
    summary["model_tiss_max_err"] = base.gap_tiss_max_err;
    summary["model_tiss_max_abs_err_us"] = base.gap_tiss_max_abs_err * 1e6;
    summary["model_err_note"] = "model_*_err: every point of the gap sweep, error of the period predicted by the "
                                "Burst-Gap law T_period = max(T_iss^0 + G, V/R) (free-running periodic bursts: no "
                                "capacity term), nothing refitted. model_tiss_*: the same points' T_iss = period - G "
                                "against max(T_iss^0, V/R - G), relative to T_iss (ill-conditioned near the corner "
                                "G = V/R - T_iss^0, where T_iss is a small difference; the absolute error is given too); "
                                "rows with T_iss <= 0: period only";
    summary["iso_err_note"] = "isolated (aligned) bursts, predicted with max(T_iss^0, (V - Q)/R)";
    summary["iso_median_err"] = base.iso_median_err;
    summary["iso_max_err"] = base.iso_max_err;
    summary["R_over_copy_engine"] = pl.R / 1e9 / ce;
    summary["fit_notes"] = base.notes;

    // Knee per K (isolated, base family): measured (model::find_knee: a jump off the floor or a confirmed
    // drain-paced step) vs predicted (first V whose max(T_iss^0, (V - Q)/R) leaves T_iss^0), in sweep steps.
    nlohmann::json knees = nlohmann::json::array();
    bool knees_ok = true;
    model::FitOptions bfo;
    bfo.knee_ratio = kKneeRatio;
    for (int K : k_sweep(SMs)) {
      const model::KneeCheck kc = model::knee_check(samples, pl, K, bfo);
      if (kc.V.empty()) continue;
      nlohmann::json kj;
      kj["K"] = K;
      kj["Q_MB"] = pl.Q(K) / 1e6;
      kj["Q_determined"] = false;
      kj["Q_note"] = "no isolated sweep fitted at this K (Q interpolated in K)";
      for (const auto& kf : base.knees)
        if (kf.K == K) {
          kj["Q_determined"] = kf.q_determined;
          kj["Q_note"] = kf.note;
          kj["R_iso_GBps"] = kf.R_iso / 1e9;
          kj["Q_held_at_V_MB"] = kf.Q_at_V / 1e6;
        }
      kj["T_iss0_us_B32KB"] = pl.tiss0(K, double(K) * 32768) * 1e6;
      kj["knee_measured_B_KB"] = kc.measured_knee >= 0 ? kc.V[kc.measured_knee] / K / 1024 : -1;
      kj["knee_predicted_B_KB"] = kc.predicted_knee >= 0 ? kc.V[kc.predicted_knee] / K / 1024 : -1;
      kj["knee_steps_apart"] = kc.steps_apart();
      knees_ok &= kc.steps_apart() >= 0 && kc.steps_apart() <= 1;
      knees.push_back(kj);
    }
    summary["per_K"] = knees;
    summary["knee_within_one_step"] = knees_ok;

    std::printf("\n# M_X (st.global, p2p, CTA producers): R = %.1f GB/s (copy engine %.1f GB/s, ratio %.3f; line rate 478)\n",
                pl.R / 1e9, ce, pl.R / 1e9 / ce);
    std::printf("%-6s %12s %9s %4s %10s %14s %14s %6s\n", "#K", "Tiss0(us)@32K", "Q(MB)", "det", "R_iso", "knee meas(KB)",
                "knee pred(KB)", "steps");
    for (auto& kj : knees)
      std::printf("%-6d %12.3f %9.3f %4s %10.1f %14.0f %14.0f %6d\n", kj["K"].get<int>(), kj["T_iss0_us_B32KB"].get<double>(),
                  kj["Q_MB"].get<double>(), kj["Q_determined"].get<bool>() ? "yes" : "no",
                  kj.value("R_iso_GBps", 0.0), kj["knee_measured_B_KB"].get<double>(),
                  kj["knee_predicted_B_KB"].get<double>(), kj["knee_steps_apart"].get<int>());
    for (auto& kj : knees) std::printf("#   %s\n", kj["Q_note"].get<std::string>().c_str());
    std::printf("# T_iss^0(K=%d, B=32KB) = %.3f us: %s\n", SMs, summary["T_iss0_us"].get<double>(),
                summary["T_iss0_note"].get<std::string>().c_str());
    std::printf("# knee predicted within one sweep step at every K: %s\n", knees_ok ? "yes" : "NO");
    std::printf("# validation without refit (Burst-Gap law): gap sweep period median %.1f%% max %.1f%%; "
                "T_iss median %.1f%% max %.1f%% (max |error| %.2f us); isolated T_iss median %.1f%% max %.1f%%\n",
                100 * base.gap_period_median_err, 100 * base.gap_period_max_err, 100 * base.gap_tiss_median_err,
                100 * base.gap_tiss_max_err, base.gap_tiss_max_abs_err * 1e6, 100 * base.iso_median_err,
                100 * base.iso_max_err);
  }
  std::printf("%-14s %9s %7s %12s %9s %9s\n", "#family", "R(GB/s)", "K", "Tiss0(us)@32K", "Q(MB)", "gap err");
  for (auto& v : variants) {
    if (v.contains("error")) {
      std::printf("%-14s not fitted: %s\n", v["family"].get<std::string>().c_str(), v["error"].get<std::string>().c_str());
      continue;
    }
    std::printf("%-14s %9.1f %7d %12.3f %9.3f %8.1f%% %s\n", v["family"].get<std::string>().c_str(), v["R_GBps"].get<double>(),
                v["K"].get<int>(), v["T_iss0_us_B32KB"].get<double>(), v["Q_MB"].get<double>(),
                100 * v["gap_median_err"].get<double>(), v["Q_determined"].get<bool>() ? "" : "(Q: lower bound)");
    if (!v["Q_determined"].get<bool>())
      std::printf("%-14s   %s\n", "", v["Q_note"].get<std::string>().c_str());
  }
  {
    std::ofstream f(out_dir + "/summary.json");
    f << summary.dump(2) << "\n";
  }
  std::printf("# wrote %s/summary.json; %d points in %.1f s\n", out_dir.c_str(), int(pts.size()),
              summary.value("elapsed_s", 0.0));
  if (plots) {
    std::string cmd = "python3 " XSTAGE_SOURCE_DIR "/scripts/plot_calibration.py '" + out_dir + "'";
    int prc = std::system(cmd.c_str());
    if (prc != 0) std::printf("# plots not written (%s exited %d); the CSV files are complete\n", cmd.c_str(), prc);
  }
  if (total_wrong) std::printf("# ERROR: %lld bytes did not land correctly\n", total_wrong);
  return rc;
}

}  // namespace xstage::bench
