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
#include "report.hpp"
#include "xstage/common/error.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/fit.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/launcher.hpp"
#include "xstage/runtime/versions.hpp"

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

}  // namespace


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
  {
    int matched = 0;
    std::string keys;
    for (auto& tc : all_cases()) {
      keys += (keys.empty() ? "" : ", ") + tc->key();
      if (!opt.only.empty() && tc->key().find(opt.only) == std::string::npos) continue;
      ++matched;
      if (opt.list) std::printf("%-26s %s\n", tc->key().c_str(), tc->description().c_str());
    }
    XSTAGE_REQUIRE(matched > 0, "--only '", opt.only, "' matches no test case (cases: ", keys, ")");
    if (opt.list) return 0;
  }
  XSTAGE_REQUIRE(opt.runs >= 1, "--runs must be >= 1, got ", opt.runs);
  runtime::require_timeout(opt.timeout_s, "--timeout: ");  // also bounds calib.cpp's timeout_ns conversion
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
    std::printf("# %s\n# xstage calibrate: %d ranks (%s), %d SMs, SM clock %.3f GHz (measured)\n",
                version_line().c_str(), P, machine.c_str(), SMs, bench.clock_ghz());
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
  summary["software"] = runtime::to_json(runtime::software_versions());
  summary["date"] = today();
  summary["world_size"] = P;
  summary["sm_count"] = SMs;
  summary["sm_clock_GHz"] = bench.clock_ghz();
  summary["copy_engine_GBps"] = ce;
  summary["sm_copy_GBps"] = smc;
  summary["elapsed_s"] = elapsed;
  std::vector<calib::RunPoint> rp;
  for (auto& p : pts)
    rp.push_back({p.c.mode, p.c.path, p.c.pattern, p.c.producer, p.c.local, p.c.K, p.c.bursts, p.c.src, p.c.dst,
                  double(p.c.B), p.r.tiss_ns, p.r.wall_us, p.r.wrong});
  calib::ReportOptions ro;
  ro.out_dir = opt.out_dir;
  ro.plots = opt.plots;
  return calib::report(csv, rp, summary, ro);
}

}  // namespace xstage::bench
