// The host half of `xstage calibrate` (see report.hpp): fit, validation in and out of sample, summary,
// platform, plots. Moved out of src/bench so that --refit needs no CUDA.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "xstage/common/atomic_file.hpp"
#include "xstage/common/error.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/fit.hpp"

#ifndef XSTAGE_SOURCE_DIR
#define XSTAGE_SOURCE_DIR "."
#endif

namespace xstage::calib {
namespace fs = std::filesystem;
namespace {

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
    if (t.in_table && t.K == K && std::fabs(t.V - V) <= 1e-9 * V) {
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

std::vector<std::string> split(const std::string& l) {
  std::vector<std::string> v;
  std::stringstream ss(l);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(x);
  if (!l.empty() && l.back() == ',') v.push_back("");
  return v;
}

// A percentage or "n/a" (no points).
std::string pct(const model::ErrStats& e, bool median) {
  if (e.n == 0) return "n/a";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * (median ? e.median : e.max));
  return b;
}
nlohmann::json err_json(const model::ErrStats& e, bool median) {
  return e.n ? nlohmann::json(median ? e.median : e.max) : nlohmann::json(nullptr);
}

// The files report() writes into its output folder, and what errors call them.
std::vector<std::pair<const char*, const char*>> report_files() {
  return {{"platform.json", "platform file"}, {"fit.json", "fit file"}, {"validation.csv", "validation file"},
          {"summary.json", "summary file"}};
}

}  // namespace

std::vector<RunPoint> read_points(const std::string& path) {
  std::error_code ec;
  XSTAGE_REQUIRE(fs::is_regular_file(path, ec), "cannot read '", path, "': ",
                 fs::exists(path, ec) ? "not a regular file" : "no such file");
  std::ifstream f(path);
  XSTAGE_REQUIRE(f.good(), "cannot read ", path);
  std::string line;
  std::getline(f, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> head = split(line);
  auto col = [&](const std::string& name) {
    auto it = std::find(head.begin(), head.end(), name);
    XSTAGE_REQUIRE(it != head.end(), path, ": column '", name, "' missing (not written by xstage calibrate?)");
    return size_t(it - head.begin());
  };
  const size_t cm = col("mode"), ct = col("target"), cK = col("K"), cB = col("B"), cti = col("tiss_ns"),
               cw = col("wall_us"), cb = col("bursts"), cpa = col("path"), cpt = col("pattern"),
               cpr = col("producer"), cwr = col("wrong"), cs = col("src"), cd = col("dst");
  std::vector<RunPoint> pts;
  int n = 1;
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto v = split(line);
    XSTAGE_REQUIRE(v.size() == head.size(), path, ":", n, ": ", v.size(), " fields, header has ", head.size());
    // A numeric field, whole (std::stoll) or not: all of it a number, or an error naming line, column and text.
    auto num = [&](size_t c, bool whole) {
      size_t used = 0;
      double x = 0;
      try {
        x = whole ? double(std::stoll(v[c], &used)) : std::stod(v[c], &used);
      } catch (const std::logic_error&) {
        used = 0;
      }
      XSTAGE_REQUIRE(used > 0 && used == v[c].size(), path, ":", n, ": column '", head[c], "': '", v[c], "' is not ",
                     whole ? "a whole number" : "a number");
      return x;
    };
    auto whole_int = [&](size_t c) {
      const double x = num(c, true);
      XSTAGE_REQUIRE(std::fabs(x) < 2147483648.0, path, ":", n, ": column '", head[c], "': ", v[c],
                     " is out of range");
      return int(x);
    };
    RunPoint p;
    p.mode = v[cm];
    p.local = v[ct] == "local";
    p.K = whole_int(cK);
    p.B = num(cB, false);
    p.bursts = whole_int(cb);
    p.path = v[cpa];
    p.pattern = v[cpt];
    p.producer = v[cpr];
    // p2p rows name their pair; a2a rows write -1 (every rank to every peer), kept as the defaults.
    if (p.pattern == "p2p") {
      p.src = whole_int(cs);
      p.dst = whole_int(cd);
    }
    p.tiss_ns = num(cti, false);
    p.wall_us = num(cw, false);
    p.wrong = static_cast<long long>(num(cwr, true));
    pts.push_back(p);
  }
  XSTAGE_REQUIRE(!pts.empty(), path, ": no points after the header");
  return pts;
}

std::string plot_command(const std::string& dir) {
  const std::string script = XSTAGE_SOURCE_DIR "/scripts/plot_calibration.py";
  std::error_code ec;
  if (!fs::is_regular_file(script, ec)) return "";
  // One plotting stack: matplotlib, from Debian's python3-matplotlib (scripts/deps.sh installs it for
  // /usr/bin/python3) or from the python3 on PATH.
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(py) + " -c 'import matplotlib' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return std::string(py) + " '" + script + "' '" + dir + "'";
  }
  return "";
}

int refit(const std::string& dir, const std::string& out_dir, bool plots) {
  std::error_code ec;
  XSTAGE_REQUIRE(!dir.empty(), "--refit: empty folder name");
  XSTAGE_REQUIRE(fs::is_directory(dir, ec), "--refit ", dir, ": ",
                 fs::exists(dir, ec) ? "not a folder" : "no such folder", " (give the folder of a finished run)");
  const std::string sp = dir + "/summary.json", csv = dir + "/calibration.csv";
  XSTAGE_REQUIRE(fs::is_regular_file(sp, ec), "--refit ", dir, ": no summary.json there");
  XSTAGE_REQUIRE(fs::is_regular_file(csv, ec), "--refit ", dir, ": no calibration.csv there");
  nlohmann::json summary;
  try {
    summary = nlohmann::json::parse(std::ifstream(sp));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(sp + " is not valid JSON: " + e.what());
  }
  for (const char* k : {"machine", "command", "date", "world_size", "sm_count", "copy_engine_GBps"})
    XSTAGE_REQUIRE(summary.contains(k), sp, ": key '", k, "' missing (not written by xstage calibrate?)");
  // Every value report() reads, its type and range, before anything is written: a bad one is named here.
  for (const char* k : {"machine", "command", "date"})
    XSTAGE_REQUIRE(summary.at(k).is_string(), sp, ": '", k, "' must be a string, got ", summary.at(k).dump());
  for (const char* k : {"world_size", "sm_count"}) {
    const auto& x = summary.at(k);
    XSTAGE_REQUIRE(x.is_number_integer() && x.get<double>() >= 1 && x.get<double>() <= 1e6, sp, ": '", k,
                   "' must be a whole number in 1..1000000, got ", x.dump());
  }
  const auto& ce = summary.at("copy_engine_GBps");
  XSTAGE_REQUIRE(ce.is_number() && ce.get<double>() >= 0 && std::isfinite(ce.get<double>()), sp,
                 ": 'copy_engine_GBps' must be a number >= 0, got ", ce.dump());
  std::vector<RunPoint> pts = read_points(csv);  // the run's own CSV, so its errors name it
  std::string use_csv = csv;
  if (!out_dir.empty() && !(fs::exists(out_dir, ec) && fs::equivalent(dir, out_dir, ec))) {
    // A self-contained output folder: the run's CSV goes with the fit (the plots read it from there). Every file
    // this writes is checked first, so a refused one leaves the folder as it was.
    if (fs::is_directory(out_dir, ec)) {
      writable_target(out_dir + "/calibration.csv", "calibration CSV");
      for (const auto& [file, what] : report_files()) writable_target(out_dir + "/" + file, what);
    }
    std::error_code mk;
    fs::create_directories(out_dir, mk);
    XSTAGE_REQUIRE(fs::is_directory(out_dir, ec), "-o ", out_dir, ": cannot create the output folder");
    std::ifstream in(csv, std::ios::binary);
    write_file_atomic(out_dir + "/calibration.csv", "calibration CSV", [&](std::ostream& f) { f << in.rdbuf(); });
    use_csv = out_dir + "/calibration.csv";
  }
  ReportOptions o;
  o.out_dir = out_dir;
  o.plots = plots;
  return report(use_csv, pts, summary, o);
}

// Fit, validation, summary and plots from measured points (rank 0 after a run, or --refit).
int report(const std::string& csv, const std::vector<RunPoint>& pts, nlohmann::json summary, const ReportOptions& opt) {
  const std::string& out_dir = opt.out_dir;
  const std::string machine = summary.at("machine"), command = summary.at("command");
  const int P = summary.at("world_size"), SMs = summary.at("sm_count");
  const double ce = summary.at("copy_engine_GBps");
  long long total_wrong = 0;
  for (auto& p : pts) total_wrong += p.wrong;
  std::vector<model::Sample> samples = model::read_samples_csv(csv);
  model::Provenance prov{machine, summary.at("date"), command, "calibration",
                         "xstage calibrate: R from zero-gap wall time, T_iss^0 from the large-gap plateaus of "
                         "periodic bursts (the isolated floor only for K rows without a plateau), Q(K) = largest "
                         "V - R*T_iss held up to the isolated knee (st.global, one source to one peer, CTA "
                         "producers); docs/MODEL.md section 7"};
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
    fo.sm_count = fo.producer == "warp" ? 0 : SMs;
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
        if (p.path != fo.path || p.pattern != fo.pattern || p.producer != fo.producer || p.local) continue;
        const double V = double(p.K) * p.B;
        if (p.mode == "zerogap" && p.B >= 16384 && p.wall_us > 0)
          r_wall = std::max(r_wall, V * p.bursts / (p.wall_us * 1e-6));
        if (p.mode == "isolated" && p.K == Kv) iso.push_back({V, p.tiss_ns});
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
      // Gap error of this family: every gap point (null = no gap sweep), and out of sample.
      const model::ErrStats gall = model::ErrStats::of([&] {
        std::vector<double> v;
        for (const auto& e : rep.errors)
          if (e.sample.mode == "gap") v.push_back(e.rel_err);
        return v;
      }());
      vj["gap_points"] = gall.n;
      vj["gap_median_err"] = err_json(gall, true);
      vj["gap_max_err"] = err_json(gall, false);
      vj["gap_period_oos_median_err"] = err_json(rep.gap_period_oos, true);
      vj["gap_period_oos_max_err"] = err_json(rep.gap_period_oos, false);
      vj["iso_median_err"] = err_json(model::ErrStats::of([&] {
        std::vector<double> v;
        for (const auto& e : rep.errors)
          if (e.sample.mode == "isolated") v.push_back(e.rel_err);
        return v;
      }()), true);
      vj["iso_oos_median_err"] = err_json(rep.iso_oos, true);
      vj["iso_oos_max_err"] = err_json(rep.iso_oos, false);
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
    if (p.mode == "zerogap" && !p.local && p.pattern == "p2p" && p.path == "st" && p.producer == "cta" &&
        p.K == SMs && p.B == 32768 && p.wall_us > 0)
      pairs.push_back({{"src", p.src}, {"dst", p.dst},
                       {"R_wall_GBps", double(p.K) * p.B * p.bursts / (p.wall_us * 1e-6) / 1e9}});
  summary["pairs"] = pairs;
  int rc = total_wrong ? 1 : 0;
  const bool write = !out_dir.empty();
  if (write) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    XSTAGE_REQUIRE(fs::is_directory(out_dir, ec), "-o ", out_dir, ": cannot create the output folder");
    for (const auto& [file, what] : report_files()) writable_target(out_dir + "/" + file, what);  // all, first
  }
  if (!have_base) {
    summary["error"] = "the base family (st/p2p/cta) could not be fitted";
    std::printf("# FIT FAILED for st/p2p/cta: %s\n", variants[0].value("error", std::string("?")).c_str());
    rc = 1;
  } else {
    const model::Platform& pl = base.platform;
    if (write) {
      pl.save(out_dir + "/platform.json");
      write_file_atomic(out_dir + "/fit.json", "fit file", [&](std::ostream& f) { f << base.to_json().dump(2) << "\n"; });
      write_file_atomic(out_dir + "/validation.csv", "validation file", [&](std::ostream& f) {
        f << "mode,K,B,V,gap_ns,gap_req_ns,quantity,measured_ns,predicted_ns,rel_err,in_sample,"
             "predicted_req_gap_ns,rel_err_req_gap\n";
        for (auto& e : base.errors)
          f << e.sample.mode << ',' << e.sample.K << ',' << e.sample.B << ',' << e.sample.V << ',' << e.sample.gap_ns
            << ',' << e.sample.gap_req_ns << ',' << e.quantity << ',' << e.measured * 1e9 << ',' << e.predicted * 1e9
            << ',' << e.rel_err << ',' << (e.in_sample ? 1 : 0) << ','
            << (e.predicted_req >= 0 ? e.predicted_req * 1e9 : -1) << ',' << e.rel_err_req << "\n";
      });
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
    summary["model_period_oos_median_err"] = err_json(base.gap_period_oos, true);
    summary["model_period_oos_max_err"] = err_json(base.gap_period_oos, false);
    summary["model_tiss_oos_median_err"] = err_json(base.gap_tiss_oos, true);
    summary["model_tiss_oos_max_err"] = err_json(base.gap_tiss_oos, false);
    summary["oos_points"] = base.oos_points;
    summary["model_period_insample_median_err"] = err_json(base.gap_period_in, true);
    summary["model_period_insample_max_err"] = err_json(base.gap_period_in, false);
    summary["model_tiss_insample_median_err"] = err_json(base.gap_tiss_in, true);
    summary["model_tiss_insample_max_err"] = err_json(base.gap_tiss_in, false);
    summary["insample_points"] = base.gap_period_in.n;
    summary["model_period_oos_reqgap_median_err"] = err_json(base.gap_period_oos_req, true);
    summary["model_period_oos_reqgap_max_err"] = err_json(base.gap_period_oos_req, false);
    summary["model_tiss_oos_reqgap_median_err"] = err_json(base.gap_tiss_oos_req, true);
    summary["model_tiss_oos_reqgap_max_err"] = err_json(base.gap_tiss_oos_req, false);
    summary["model_err_note"] =
        "Gap sweep of periodic bursts, the Burst-Gap law T_period = max(T_iss^0 + G, V/R) and T_iss = max(T_iss^0, "
        "V/R - G) with R, T_iss^0, Q fixed. model_*_oos_*: only points not used to fit T_iss^0 (the plateau points, "
        "G >= 1.05 V/R, give T_iss^0 and are in sample: model_*_insample_*), with the measured gap as G; "
        "model_*_oos_reqgap_*: the same points with the requested gap as G (what a user of the model knows; the "
        "measured gap is the request plus the gap loop's overhead). model_median_err/model_max_err/model_tiss_*: "
        "every point, in and out of sample (kept for comparison with older runs). T_iss is relative to T_iss = "
        "period - G, ill-conditioned near the corner G = V/R - T_iss^0; rows with T_iss <= 0: period only. "
        "null: no points";
    summary["iso_err_note"] = "isolated (aligned) bursts, predicted with max(T_iss^0, (V - Q)/R); iso_oos_*: without "
                              "the points behind a T_iss^0 table entry or behind Q; the knee check is in sample "
                              "(Q is the outstanding volume held at the measured knee)";
    summary["iso_median_err"] = base.iso_median_err;
    summary["iso_max_err"] = base.iso_max_err;
    summary["iso_oos_median_err"] = err_json(base.iso_oos, true);
    summary["iso_oos_max_err"] = err_json(base.iso_oos, false);
    summary["iso_oos_points"] = base.iso_oos.n;
    summary["R_over_copy_engine"] = pl.R / 1e9 / ce;
    summary["fit_notes"] = base.notes;
    {
      nlohmann::json tab = nlohmann::json::array();
      for (const auto& t : base.tiss0_sources)
        tab.push_back({{"K", t.K}, {"V_MB", t.V / 1e6}, {"source", t.source}, {"in_table", t.in_table},
                       {"measured_us", t.measured * 1e6}, {"table_us", t.in_table ? nlohmann::json(t.tiss0 * 1e6) : nlohmann::json(nullptr)},
                       {"points", t.points}});
      summary["T_iss0_sources"] = tab;
    }

    // Knee per K (isolated, base family): measured (model::find_knee: a jump off the floor or a confirmed
    // drain-paced step) vs predicted (first V whose max(T_iss^0, (V - Q)/R) leaves T_iss^0), in sweep steps.
    // In sample: Q is the outstanding volume held at the measured knee.
    std::set<int> ks;
    for (const auto& s : samples)
      if (s.mode == "isolated" && s.target == "remote" && s.path == "st" && s.pattern == "p2p" && s.producer == "cta")
        ks.insert(s.K);
    nlohmann::json knees = nlohmann::json::array();
    bool knees_ok = true;
    model::FitOptions bfo;
    bfo.knee_ratio = kKneeRatio;
    for (int K : ks) {
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
    summary["knee_check_in_sample"] = true;

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
    std::printf("# T_iss^0(K, V) table (gap plateaus of periodic bursts; a K row without one: the isolated floor):\n");
    std::printf("%-6s %9s %12s %12s %-15s %s\n", "#K", "V(MB)", "table(us)", "measured(us)", "source", "points");
    for (const auto& t : base.tiss0_sources)
      if (t.in_table)
        std::printf("%-6d %9.3f %12.3f %12.3f %-15s %d\n", t.K, t.V / 1e6, t.tiss0 * 1e6, t.measured * 1e6,
                    t.source.c_str(), t.points);
    {
      int apart = 0;
      for (const auto& t : base.tiss0_sources) apart += !t.in_table;
      if (apart)
        std::printf("# %d isolated (aligned) floor points kept out of that table (their K rows have gap plateaus); "
                    "fit.json tiss0_sources lists them\n", apart);
    }
    std::printf("# knee predicted within one sweep step at every K: %s (in sample: Q is read at the measured knee)\n",
                knees_ok ? "yes" : "NO");
    std::printf("# validation, R, T_iss^0, Q fixed (Burst-Gap law; in sample = points that fitted T_iss^0 or Q):\n");
    std::printf("#   gap sweep period, out of sample (%d points): measured gap median %s max %s; requested gap median %s max %s\n",
                base.oos_points, pct(base.gap_period_oos, true).c_str(), pct(base.gap_period_oos, false).c_str(),
                pct(base.gap_period_oos_req, true).c_str(), pct(base.gap_period_oos_req, false).c_str());
    std::printf("#   gap sweep T_iss, out of sample (%d points): measured gap median %s max %s; requested gap median %s max %s\n",
                base.gap_tiss_oos.n, pct(base.gap_tiss_oos, true).c_str(), pct(base.gap_tiss_oos, false).c_str(),
                pct(base.gap_tiss_oos_req, true).c_str(), pct(base.gap_tiss_oos_req, false).c_str());
    std::printf("#   gap sweep, in sample (%d plateau points): period median %s max %s; T_iss median %s max %s\n",
                base.gap_period_in.n, pct(base.gap_period_in, true).c_str(), pct(base.gap_period_in, false).c_str(),
                pct(base.gap_tiss_in, true).c_str(), pct(base.gap_tiss_in, false).c_str());
    std::printf("#   isolated T_iss: out of sample (%d points) median %s max %s; in sample (%d points) median %s max %s\n",
                base.iso_oos.n, pct(base.iso_oos, true).c_str(), pct(base.iso_oos, false).c_str(), base.iso_in.n,
                pct(base.iso_in, true).c_str(), pct(base.iso_in, false).c_str());
  }
  std::printf("%-14s %9s %7s %12s %9s %9s %9s\n", "#family", "R(GB/s)", "K", "Tiss0(us)@32K", "Q(MB)", "gap err",
              "gap pts");
  for (auto& v : variants) {
    if (v.contains("error")) {
      std::printf("%-14s not fitted: %s\n", v["family"].get<std::string>().c_str(), v["error"].get<std::string>().c_str());
      continue;
    }
    char ge[32] = "n/a";
    if (!v["gap_median_err"].is_null()) std::snprintf(ge, sizeof ge, "%.1f%%", 100 * v["gap_median_err"].get<double>());
    std::printf("%-14s %9.1f %7d %12.3f %9.3f %9s %9d%s\n", v["family"].get<std::string>().c_str(), v["R_GBps"].get<double>(),
                v["K"].get<int>(), v["T_iss0_us_B32KB"].get<double>(), v["Q_MB"].get<double>(), ge,
                v["gap_points"].get<int>(), v["Q_determined"].get<bool>() ? "" : " (Q: lower bound)");
    if (!v["Q_determined"].get<bool>())
      std::printf("%-14s   %s\n", "", v["Q_note"].get<std::string>().c_str());
  }
  if (!write) {
    std::printf("# nothing written (no -o): pass -o DIR to write summary.json, platform.json, fit.json, "
                "validation.csv and the plots\n");
  } else {
    write_file_atomic(out_dir + "/summary.json", "summary file", [&](std::ostream& f) { f << summary.dump(2) << "\n"; });
    std::printf("# wrote %s/summary.json; %d points in %.1f s\n", out_dir.c_str(), int(pts.size()),
                summary.value("elapsed_s", 0.0));
    if (opt.plots && rc == 0) {
      // One plotting stack: Debian's python3-matplotlib (scripts/deps.sh installs it).
      const std::string cmd = plot_command(out_dir);
      if (cmd.empty())
        throw RuntimeError("plots: no python3 with matplotlib, or no " XSTAGE_SOURCE_DIR "/scripts/plot_calibration.py "
                           "(bash scripts/deps.sh installs python3-matplotlib); the CSV and JSON files are written; "
                           "pass --no-plots to skip the plots");
      const std::string log = out_dir + "/.plot.log";
      const int prc = std::system((cmd + " >'" + log + "' 2>&1").c_str());
      std::string last;
      {
        std::ifstream lf(log);
        for (std::string l; std::getline(lf, l);)
          if (!l.empty()) last = l;
      }
      std::error_code ec;
      fs::remove(log, ec);
      if (prc != 0) throw RuntimeError("plots: " + cmd + " failed: " + last);
      std::printf("%s\n", last.c_str());  // plot_calibration.py's last line, a "# wrote ..." comment
    }
  }
  if (total_wrong) std::printf("# ERROR: %lld bytes did not land correctly\n", total_wrong);
  return rc;
}

}  // namespace xstage::calib
