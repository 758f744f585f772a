// Calibration fitting (SPEC §4) and the sample CSV (docs/CSV.md). Rules: docs/MODEL.md §Fitting.
#include "xstage/model/fit.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "xstage/common/atomic_file.hpp"
#include "xstage/common/error.hpp"
#include "xstage/model/burst_gap.hpp"

namespace xstage::model {
namespace {

const char* kRequired[] = {"mode", "target", "K", "B", "V", "gap_ns", "tiss_ns", "period_ns", "wall_us"};

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  for (auto& f : out) {  // trim spaces
    size_t a = f.find_first_not_of(" \t"), b = f.find_last_not_of(" \t");
    f = a == std::string::npos ? std::string() : f.substr(a, b - a + 1);
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fmtd(double v, int digits = 3) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

// Weighted least squares y = a + b x with weights 1/y^2: timing noise is relative, so this minimises
// the relative residuals (the quantity reported as fit quality).
void linfit(const std::vector<double>& x, const std::vector<double>& y, double& a, double& b) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double w = 1 / (y[i] * y[i]);
    n += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  double den = n * sxx - sx * sx;
  b = (n * sxy - sx * sy) / den;
  a = (sy - b * sx) / n;
}

bool same_point(const Sample& a, const Sample& b) {
  return a.mode == b.mode && a.K == b.K && a.B == b.B && a.gap_ns == b.gap_ns && a.bursts == b.bursts &&
         a.path == b.path && a.pattern == b.pattern && a.producer == b.producer;
}

}  // namespace

std::vector<Sample> parse_samples_csv(const std::string& text, const std::string& origin, int default_bursts) {
  XSTAGE_REQUIRE(default_bursts > 0, "default bursts per run must be positive, got ", default_bursts);
  // Spreadsheet exports: a UTF-8 byte-order mark is dropped, lines ended by CR alone are read as lines.
  std::string body = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? text.substr(3) : text;
  for (size_t i = 0; i < body.size(); ++i)
    if (body[i] == '\r' && (i + 1 == body.size() || body[i + 1] != '\n')) body[i] = '\n';
  std::istringstream in(body);
  std::string line;
  int lineno = 0;
  std::vector<std::string> header;
  std::map<std::string, size_t> col;
  std::vector<Sample> out;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos || line[line.find_first_not_of(" \t")] == '#')
      continue;
    auto f = split_csv_line(line);
    if (header.empty()) {
      header = f;
      for (size_t i = 0; i < f.size(); ++i) {
        XSTAGE_REQUIRE(!f[i].empty(), origin, ":", lineno, ":", i + 1, ": column ", i + 1,
                       " of the header has no name (a trailing comma?)");
        XSTAGE_REQUIRE(col.emplace(f[i], i).second, origin, ":", lineno, ":", i + 1, ": duplicate column '",
                       f[i], "'");
      }
      for (const char* r : kRequired)
        XSTAGE_REQUIRE(col.count(r), origin, ":", lineno, ": missing column '", r, "' in the header");
      continue;
    }
    XSTAGE_REQUIRE(f.size() == header.size(), origin, ":", lineno, ":", std::min(f.size(), header.size()) + 1,
                   ": expected ", header.size(), " fields (as in the header), got ", f.size());
    auto where = [&](const char* name) {
      return origin + ":" + std::to_string(lineno) + ":" + std::to_string(col.at(name) + 1) + " (column '" +
             name + "')";
    };
    auto number = [&](const char* name) {
      const std::string& v = f[col.at(name)];
      size_t pos = 0;
      double d = 0;
      try {
        d = std::stod(v, &pos);
      } catch (...) {
        pos = 0;
      }
      XSTAGE_REQUIRE(!v.empty() && pos == v.size() && std::isfinite(d), where(name), ": '", v,
                     "' is not a number");
      return d;
    };
    auto integer = [&](const char* name) {
      double d = number(name);
      XSTAGE_REQUIRE(d == std::floor(d) && std::fabs(d) < 2e9, where(name), ": '", f[col.at(name)],
                     "' is not an integer");
      return d;
    };
    auto word = [&](const char* name, std::initializer_list<const char*> allowed) {
      const std::string& v = f[col.at(name)];
      std::string list;
      for (const char* a : allowed) {
        if (v == a) return v;
        list += (list.empty() ? "" : " | ") + std::string(a);
      }
      throw UsageError(where(name) + ": '" + v + "' is not one of " + list);
    };
    Sample s;
    s.line = lineno;
    s.mode = word("mode", {"zerogap", "gap", "isolated"});
    s.target = word("target", {"remote", "local"});
    s.K = int(integer("K"));
    XSTAGE_REQUIRE(s.K > 0, where("K"), ": K must be positive, got ", s.K);
    s.B = number("B");
    XSTAGE_REQUIRE(s.B > 0, where("B"), ": B must be positive, got ", f[col.at("B")]);
    s.V = number("V");
    XSTAGE_REQUIRE(s.V > 0, where("V"), ": V must be positive, got ", f[col.at("V")]);
    XSTAGE_REQUIRE(std::fabs(s.V - s.K * s.B) <= 1e-6 * s.V + 0.5, where("V"), ": V = ", f[col.at("V")],
                   " is not K*B = ", fmtd(s.K * s.B, 0));
    s.gap_ns = number("gap_ns");
    XSTAGE_REQUIRE(s.gap_ns >= 0, where("gap_ns"), ": gap must be >= 0, got ", f[col.at("gap_ns")]);
    s.tiss_ns = number("tiss_ns");
    // Periodic bursts measure T_iss as period - measured gap: timing noise can push that difference to or
    // below 0 where the issue is short; such a row is kept (its period is still validated, its T_iss not).
    XSTAGE_REQUIRE(s.tiss_ns > 0 || s.mode == "gap", where("tiss_ns"), ": T_iss must be positive, got ",
                   f[col.at("tiss_ns")]);
    s.period_ns = number("period_ns");
    XSTAGE_REQUIRE(s.period_ns >= 0, where("period_ns"), ": period must be >= 0, got ", f[col.at("period_ns")]);
    s.wall_us = number("wall_us");
    XSTAGE_REQUIRE(s.wall_us >= 0, where("wall_us"), ": wall time must be >= 0, got ", f[col.at("wall_us")]);
    s.bursts = default_bursts;
    if (col.count("bursts")) {
      s.bursts = int(integer("bursts"));
      XSTAGE_REQUIRE(s.bursts > 0, where("bursts"), ": bursts must be positive, got ", s.bursts);
    }
    if (col.count("path")) s.path = word("path", {"st", "tma"});
    if (col.count("pattern")) s.pattern = word("pattern", {"p2p", "a2a"});
    if (col.count("producer")) s.producer = word("producer", {"cta", "warp"});
    if (col.count("gap_req_ns") && s.mode == "gap") {
      s.gap_req_ns = number("gap_req_ns");
      XSTAGE_REQUIRE(s.gap_req_ns >= 0, where("gap_req_ns"), ": requested gap must be >= 0, got ",
                     f[col.at("gap_req_ns")]);
    }
    if (col.count("wrong")) {
      s.wrong = (long long)integer("wrong");
      XSTAGE_REQUIRE(s.wrong == 0, where("wrong"), ": ", s.wrong,
                     " bytes did not land correctly; the sample is invalid");
    }
    out.push_back(s);
  }
  XSTAGE_REQUIRE(!header.empty(), origin, ": empty file (a header row is required)");
  XSTAGE_REQUIRE(!out.empty(), origin, ": no samples after the header");
  return out;
}

std::vector<Sample> read_samples_csv(const std::string& path, int default_bursts) {
  std::error_code ec;
  XSTAGE_REQUIRE(!path.empty(), "sample file: empty path");
  XSTAGE_REQUIRE(std::filesystem::exists(path, ec), "sample file '", path, "' does not exist");
  XSTAGE_REQUIRE(!std::filesystem::is_directory(path, ec), "sample file '", path,
                 "' is a directory, not a CSV file");
  std::ifstream in(path);
  XSTAGE_REQUIRE(in, "cannot read sample file '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_samples_csv(ss.str(), path, default_bursts);
}

void write_samples_csv(const std::string& path, const std::vector<Sample>& samples) {
  write_file_atomic(path, "sample file", [&](std::ostream& out) {
    out << "mode,target,K,B,V,gap_ns,tiss_ns,period_ns,wall_us,bursts,path,pattern,producer,wrong\n";
    out.precision(10);
    for (const auto& s : samples)
      out << s.mode << ',' << s.target << ',' << s.K << ',' << s.B << ',' << s.V << ',' << s.gap_ns << ','
          << s.tiss_ns << ',' << s.period_ns << ',' << s.wall_us << ',' << s.bursts << ',' << s.path << ','
          << s.pattern << ',' << s.producer << ',' << s.wrong << '\n';
  });
}

ErrStats ErrStats::of(std::vector<double> v) {
  ErrStats e;
  e.n = int(v.size());
  if (v.empty()) return e;
  e.median = ::xstage::model::median(v);
  e.max = *std::max_element(v.begin(), v.end());
  return e;
}

nlohmann::json ErrStats::to_json() const {
  if (n == 0) return {{"n", 0}, {"median", nullptr}, {"max", nullptr}};
  return {{"n", n}, {"median", median}, {"max", max}};
}

std::string ErrStats::text() const {
  if (n == 0) return "n/a (no points)";
  return "median " + fmtd(100 * median, 1) + " %, max " + fmtd(100 * max, 1) + " % (n = " + std::to_string(n) + ")";
}

FitReport fit_platform(const std::vector<Sample>& all, const FitOptions& opt, const Provenance& provenance) {
  XSTAGE_REQUIRE(opt.drain_ratio > 1, "drain ratio must be > 1, got ", opt.drain_ratio);
  XSTAGE_REQUIRE(opt.plateau_margin >= 1, "plateau margin must be >= 1, got ", opt.plateau_margin);
  XSTAGE_REQUIRE(opt.knee_ratio > 1, "knee ratio must be > 1, got ", opt.knee_ratio);
  XSTAGE_REQUIRE(opt.knee_rate_ratio > 1, "knee rate ratio must be > 1, got ", opt.knee_rate_ratio);
  FitReport rep;
  std::vector<Sample> s;
  for (const auto& x : all)
    if (x.path == opt.path && x.pattern == opt.pattern && x.producer == opt.producer) s.push_back(x);
  if (s.size() != all.size())
    rep.notes.push_back(std::to_string(all.size() - s.size()) + " samples of another path/pattern/producer "
                        "left out (fitting " + opt.path + "/" + opt.pattern + "/" + opt.producer + ")");
  XSTAGE_REQUIRE(!s.empty(), "no samples with path=", opt.path, ", pattern=", opt.pattern,
                 ", producer=", opt.producer);
  auto control = [&](const Sample& r) -> const Sample* {
    for (const auto& x : s)
      if (x.target == "local" && same_point(x, r)) return &x;
    return nullptr;
  };

  // --- R: wall = overhead + bursts*V/R over drain-dominated zero-gap remote points.
  std::vector<const Sample*> cand, unchecked;
  for (const auto& x : s) {
    if (x.mode != "zerogap" || x.target != "remote") continue;
    if (x.wall_us <= 0) {
      rep.notes.push_back("R: line " + std::to_string(x.line) + " has no wall time; not used");
      continue;
    }
    const Sample* c = control(x);
    if (c && c->wall_us > 0) {
      if (x.wall_us >= opt.drain_ratio * c->wall_us) {
        cand.push_back(&x);
      } else {
        ++rep.r_points_rejected;
        rep.notes.push_back("R: rejected line " + std::to_string(x.line) + " (K=" + std::to_string(x.K) +
                            ", B=" + fmtd(x.B, 0) + "): not drain-dominated, wall " + fmtd(x.wall_us, 1) +
                            " us < " + fmtd(opt.drain_ratio, 1) + " x local control " + fmtd(c->wall_us, 1) + " us");
      }
    } else {
      unchecked.push_back(&x);
    }
  }
  auto fit_r = [&](const std::vector<const Sample*>& pts, double& a, double& R) {
    std::vector<double> xs, ys;
    for (auto* p : pts) {
      xs.push_back(double(p->bursts) * p->V);
      ys.push_back(p->wall_us * 1e-6);
    }
    bool spread = std::any_of(xs.begin(), xs.end(), [&](double v) { return std::fabs(v - xs[0]) > 1e-9 * xs[0]; });
    if (pts.size() >= 2 && spread) {
      double b;
      linfit(xs, ys, a, b);
      XSTAGE_REQUIRE(b > 0, "cannot determine R: wall time does not grow with volume over the zero-gap points");
      R = 1 / b;
    } else {
      a = 0;
      double sx = 0, sy = 0;
      for (size_t i = 0; i < xs.size(); ++i) sx += xs[i], sy += ys[i];
      R = sx / sy;
    }
  };
  std::vector<const Sample*> used = cand;
  used.insert(used.end(), unchecked.begin(), unchecked.end());
  XSTAGE_REQUIRE(!used.empty(), "cannot determine R: no drain-dominated zero-gap remote samples with wall time");
  double a = 0, R = 0;
  fit_r(used, a, R);
  if (!unchecked.empty()) {
    // Points without a local control: drain-dominated if the drain accounts for at least 1 - 1/ratio of
    // the wall time under the first fit (the same criterion the control expresses).
    std::vector<const Sample*> keep = cand;
    for (auto* p : unchecked) {
      double drain = p->bursts * p->V / R;
      if (drain >= (1 - 1 / opt.drain_ratio) * p->wall_us * 1e-6) {
        keep.push_back(p);
      } else {
        ++rep.r_points_rejected;
        rep.notes.push_back("R: rejected line " + std::to_string(p->line) + ": drain " + fmtd(drain * 1e6, 1) +
                            " us is under " + fmtd(100 * (1 - 1 / opt.drain_ratio), 0) + "% of wall " +
                            fmtd(p->wall_us, 1) + " us (no local control)");
      }
    }
    XSTAGE_REQUIRE(!keep.empty(), "cannot determine R: every zero-gap point was rejected as not drain-dominated");
    used = keep;
    fit_r(used, a, R);
  }
  rep.r_points_used = int(used.size());
  rep.launch_overhead = a;
  {
    double se = 0;
    for (auto* p : used) {
      double pred = a + p->bursts * p->V / R, meas = p->wall_us * 1e-6;
      se += (pred - meas) * (pred - meas) / (meas * meas);
    }
    rep.r_fit_rel_rmse = std::sqrt(se / used.size());
  }
  rep.notes.push_back("R = " + fmtd(R / 1e9, 1) + " GB/s from " + std::to_string(used.size()) +
                      " zero-gap points (wall = " + fmtd(a * 1e6, 2) + " us + bursts*V/R)");

  Platform& P = rep.platform;
  P.name = opt.name;
  P.provenance = provenance;
  P.R = R;
  int maxK = 0;
  for (const auto& x : s) maxK = std::max(maxK, x.K);
  XSTAGE_REQUIRE(opt.sm_count <= 0 || opt.sm_count >= maxK, "SM count ", opt.sm_count, " is below the largest K = ",
                 maxK, " in the samples (one producer per SM at most): give --sm-count >= ", maxK, " or leave it out");
  P.sm_count = opt.sm_count > 0 ? opt.sm_count : maxK;
  P.world_size = opt.world_size;

  // --- Isolated sweeps, one per K (docs/MODEL.md §7, steps 2-3). Repeated V: median T_iss.
  std::map<int, std::map<double, std::vector<double>>> iso_rem, iso_loc;
  for (const auto& x : s)
    if (x.mode == "isolated") (x.target == "remote" ? iso_rem : iso_loc)[x.K][x.V].push_back(x.tiss_ns * 1e-9);
  XSTAGE_REQUIRE(!iso_rem.empty(), "cannot determine Q: no isolated remote samples (mode=isolated, target=remote)");
  std::map<std::pair<int, double>, double> floor_pts;  // (K, V) -> T_iss on the floor
  std::map<int, int> knee_index;                       // K -> index of the first point past the knee
  std::map<int, std::vector<std::pair<double, double>>> sweeps;  // K -> (V, T) sorted by V
  for (auto& [K, byV] : iso_rem) {
    std::vector<double> V, T, C, q;
    for (auto& [v, ts] : byV) {
      V.push_back(v);
      T.push_back(median(ts));
      auto c = iso_loc.find(K);
      C.push_back(c != iso_loc.end() && c->second.count(v) ? median(c->second.at(v)) : 0);
      q.push_back(v - R * T.back());
      sweeps[K].push_back({v, T.back()});
    }
    const int n = int(V.size());
    // Knee: find_knee() (a jump off the floor, or a confirmed drain-paced step).
    auto paced = [&](int i) { return R * (T[i] - T[i - 1]) > (V[i] - V[i - 1]) / opt.knee_rate_ratio; };
    const int k = find_knee(V, T, C, R, opt);
    KneeFit kf;
    kf.K = K;
    kf.points = n;
    kf.largest_V = V.back();
    for (int i = 0; i < (k < 0 ? n : k); ++i) floor_pts[{K, V[i]}] = T[i];
    if (k > 0) kf.last_floor_V = V[k - 1];
    else if (k < 0) kf.last_floor_V = V.back();
    // Q: V - R*T_iss is the volume a burst still held when its issue ended (issued V, drained at most
    // R*T_iss). In the model it rises along the floor (issue outruns the drain) and equals Q from the knee
    // on (T = (V - Q)/R); the isolated bursts measured here drain slower than R past the knee, so it falls
    // there instead. Its maximum up to the first point m at or after the knee where it stops rising at
    // floor speed (the issue is paced by the drain) is the capacity; those points, nearest the knee, carry
    // the least timing noise (R*T*noise), so later points are not searched.
    int m = -1;
    if (k >= 0)
      for (int i = std::max(k, 1); i < n; ++i)
        if (paced(i)) {
          m = i;
          break;
        }
    const int last = m >= 0 ? m : n - 1;
    int best = 0;
    for (int i = 1; i <= last; ++i)
      if (q[i] > q[best]) best = i;
    kf.Q = std::max(0.0, q[best]);
    kf.Q_at_V = V[best];
    kf.q_determined = k >= 0 && m >= 0 && q[best] > 0;
    if (k >= 0) {
      kf.knee_V = V[k];
      knee_index[K] = k;
      std::vector<double> tv, tt;
      for (int i = m >= 0 ? m : k; i < n; ++i) tv.push_back(V[i]), tt.push_back(T[i]);
      if (tv.size() >= 3) {
        double sv = 0, st = 0, svv = 0, svt = 0, N = double(tv.size());
        for (size_t i = 0; i < tv.size(); ++i) sv += tv[i], st += tt[i], svv += tv[i] * tv[i], svt += tv[i] * tt[i];
        const double den = N * svv - sv * sv, b = den != 0 ? (N * svt - sv * st) / den : 0, a = (st - b * sv) / N;
        if (b > 0) kf.R_iso = 1 / b, kf.Q_tail = -a / b;
      }
    }
    const std::string Ks = "Q(K=" + std::to_string(K) + ")";
    const std::string largest = "largest V = " + fmtd(V.back() / 1e6, 3) + " MB";
    if (kf.q_determined) {
      kf.note = Ks + " = " + fmtd(kf.Q / 1e6, 3) + " MB: max of V - R*T_iss up to the knee (held at V = " +
                fmtd(kf.Q_at_V / 1e6, 3) + " MB; floor up to V = " + fmtd(kf.last_floor_V / 1e6, 3) +
                " MB, knee at V = " + fmtd(kf.knee_V / 1e6, 3) + " MB)";
      if (kf.R_iso > 0)
        kf.note += "; past the knee T_iss grows at R_iso = " + fmtd(kf.R_iso / 1e9, 1) + " GB/s (" +
                   fmtd(100 * (kf.R_iso / R - 1), 0) + "% vs R; tail line T = (V - " + fmtd(kf.Q_tail / 1e6, 3) +
                   " MB)/R_iso)";
    } else if (k < 0) {
      kf.note = Ks + " not determined: no knee within the swept V (" + largest + ", T_iss " +
                fmtd(T.back() * 1e6, 3) + " us); the bursts held up to " + fmtd(kf.Q / 1e6, 3) +
                " MB (V - R*T_iss), a lower bound";
    } else if (m < 0) {
      kf.note = Ks + " not determined: V - R*T_iss still rising at floor speed up to the " + largest + " (knee at V = " +
                fmtd(kf.knee_V / 1e6, 3) + " MB); " + fmtd(kf.Q / 1e6, 3) + " MB is a lower bound";
    } else {
      kf.note = Ks + " not determined: V - R*T_iss <= 0 at every point up to the knee (the issue never "
                "outran the drain)";
    }
    rep.notes.push_back(kf.note);
    rep.knees.push_back(kf);
  }

  // Capacity table: the determined Q(K); when no K has a knee, the lower bounds, stated as such.
  Platform qP;
  qP.name = opt.name;
  for (const auto& kf : rep.knees)
    if (kf.q_determined) qP.q_table.push_back({kf.K, kf.Q});
  if (qP.q_table.empty()) {
    for (const auto& kf : rep.knees)
      if (kf.Q > 0) qP.q_table.push_back({kf.K, kf.Q});
    rep.q_lower_bound = !qP.q_table.empty();
    if (rep.q_lower_bound)
      rep.notes.push_back("Q: no K has a knee within its isolated sweep; the Q table holds lower bounds (the "
                          "model then overstates backpressure)");
  }
  XSTAGE_REQUIRE(!qP.q_table.empty(), "cannot determine Q: the isolated bursts never held any outstanding volume "
                 "(V - R*T_iss <= 0 at every point, R = ", fmtd(R / 1e9, 1), " GB/s)");

  // --- T_iss^0: large-gap plateaus of periodic bursts (G >= margin * V/R: the drain keeps up, the issue is
  // the recovered T_iss^0), for every V: free-running producers drift apart, so a periodic burst is never
  // one aligned burst of V and the capacity term (V - Q)/R does not apply (docs/MODEL.md §3). One source per K
  // row: a row with any plateau takes the plateaus alone, a row without takes the isolated floor. A note
  // says when an aligned burst of the plateau's V would overflow Q(K) (what the capacity bound is about).
  std::map<std::pair<int, double>, std::vector<double>> plateau;
  auto on_plateau = [&](const Sample& x) {
    return x.mode == "gap" && x.target == "remote" && x.tiss_ns > 0 && x.gap_ns * 1e-9 >= opt.plateau_margin * x.V / R;
  };
  for (const auto& x : s)
    if (on_plateau(x)) plateau[{x.K, x.V}].push_back(x.tiss_ns * 1e-9);
  std::set<int> plateau_K;
  for (auto& [k, v] : plateau) plateau_K.insert(k.first);
  for (auto& [k, v] : plateau) {
    const double Tp = median(v), V = k.second;
    const double qpk = bg::q_peak(V, R, Tp), Qk = qP.Q(k.first);
    FitReport::Tiss0Source src{k.first, V, Tp, "gap plateau", int(v.size()), qpk, Qk, qpk > Qk, true, Tp};
    rep.tiss0_sources.push_back(src);
    rep.tiss0_points_used += int(v.size());
    std::string note = "T_iss^0(K=" + std::to_string(k.first) + ", V=" + fmtd(V / 1e6, 3) + " MB) = " +
                       fmtd(Tp * 1e6, 3) + " us: gap plateau (median of " + std::to_string(v.size()) +
                       " periodic points with G >= " + fmtd(opt.plateau_margin, 2) + " V/R)";
    if (src.aligned_overflow) {
      ++rep.plateaus_aligned_overflow;
      note += "; an aligned burst of this V would overflow Q" + std::string(rep.q_lower_bound ? " (lower bound)" : "") +
              " (q_peak = " + fmtd(qpk / 1e6, 3) + " MB > " + fmtd(Qk / 1e6, 3) + " MB): isolated, it issues in " +
              "(V - Q)/R = " + fmtd((V - Qk) / R * 1e6, 3) + " us";
    } else {
      note += "; an aligned burst of this V fits Q (q_peak = " + fmtd(qpk / 1e6, 3) + " MB <= " + fmtd(Qk / 1e6, 3) + " MB)";
    }
    rep.notes.push_back(note);
  }
  int floors_apart = 0;
  for (auto& [k, t] : floor_pts) {
    const bool in_table = !plateau_K.count(k.first);  // one source per K row
    rep.tiss0_sources.push_back({k.first, k.second, t, "isolated floor", 1, bg::q_peak(k.second, R, t),
                                 qP.Q(k.first), false, in_table, t});
    if (in_table) ++rep.tiss0_points_used;
    else ++floors_apart;
  }
  if (floors_apart)
    rep.notes.push_back("T_iss^0: " + std::to_string(floors_apart) + " isolated floor points kept out of the table: "
                        "their K rows have gap plateaus (aligned bursts issue slower than free-running periodic "
                        "ones; the two sources are not mixed in one row); they are validated out of sample");
  // One row per K, non-decreasing in V: pool adjacent violators, weighted by the points behind each entry.
  {
    std::map<int, std::vector<FitReport::Tiss0Source*>> rows;
    for (auto& t : rep.tiss0_sources)
      if (t.in_table) rows[t.K].push_back(&t);
    for (auto& [K, row] : rows) {
      std::sort(row.begin(), row.end(), [](auto* a, auto* b) { return a->V < b->V; });
      struct Block { double sum_wt, w; size_t first, last; };
      std::vector<Block> st;
      for (size_t i = 0; i < row.size(); ++i) {
        st.push_back({row[i]->measured * row[i]->points, double(row[i]->points), i, i});
        while (st.size() > 1 && st[st.size() - 2].sum_wt / st[st.size() - 2].w > st.back().sum_wt / st.back().w) {
          Block b = st.back();
          st.pop_back();
          st.back().sum_wt += b.sum_wt;
          st.back().w += b.w;
          st.back().last = b.last;
        }
      }
      int pooled = 0;
      for (const Block& b : st) {
        for (size_t i = b.first; i <= b.last; ++i) row[i]->tiss0 = b.sum_wt / b.w;
        if (b.last > b.first) pooled += int(b.last - b.first + 1);
      }
      if (pooled)
        rep.notes.push_back("T_iss^0(K=" + std::to_string(K) + "): " + std::to_string(pooled) + " entries pooled "
                            "to keep the row non-decreasing in V (measured values fell with V: noise)");
      for (auto* t : row) P.tiss0_table.push_back({t->K, t->V, t->tiss0});
    }
  }
  XSTAGE_REQUIRE(!P.tiss0_table.empty(), "cannot determine T_iss^0: no isolated remote points below the knee and "
                 "no gap plateau (G >= ", opt.plateau_margin, " V/R)");
  {
    std::map<int, double> vmax;
    for (const auto& e : P.tiss0_table) vmax[e.K] = std::max(vmax[e.K], e.V);
    for (auto& [K, v] : vmax)
      rep.notes.push_back("T_iss^0(K=" + std::to_string(K) + ") measured up to V = " + fmtd(v / 1e6, 3) +
                          " MB; beyond, the model scales the last point in proportion to V (Platform::tiss0)");
  }
  P.q_table = qP.q_table;

  // Fit quality of the capacity term: the model's T_iss^iso over the points past each determined knee.
  double q_se = 0;
  int q_n = 0;
  for (const auto& kf : rep.knees) {
    if (!kf.q_determined) continue;
    const auto& sw = sweeps[kf.K];
    for (size_t i = size_t(knee_index[kf.K]); i < sw.size(); ++i) {
      const double pred = bg::tiss_iso(sw[i].first, R, P.tiss0(kf.K, sw[i].first), kf.Q), meas = sw[i].second;
      q_se += (pred - meas) * (pred - meas) / (meas * meas);
      ++q_n;
    }
  }
  rep.q_points_used = q_n;
  rep.q_fit_rel_rmse = q_n ? std::sqrt(q_se / q_n) : 0;
  P.validate();
  // --- Prediction error on every remote point, nothing refitted. A point used to fit the parameter that
  // decides its prediction is in sample (PointError::in_sample) and reported apart.
  std::set<std::pair<int, double>> iso_fit;  // isolated (K, V) behind a table floor entry or behind Q
  for (const auto& t : rep.tiss0_sources)
    if (t.in_table && t.source == "isolated floor") iso_fit.insert({t.K, t.V});
  for (const auto& kf : rep.knees)
    for (const auto& q : P.q_table)
      if (q.K == kf.K && kf.Q > 0) iso_fit.insert({kf.K, kf.Q_at_V});
  std::vector<double> gap_e, iso_e, zg_e, gap_pe, gap_te;
  std::vector<double> pin, pout, tin, tout, preq, treq, iin, iout;
  for (const auto& x : s) {
    if (x.target != "remote") continue;
    double T0 = P.tiss0(x.K, x.V), G = x.gap_ns * 1e-9;
    auto add = [&](const char* q, double meas, double pred, bool in_sample, std::vector<double>& bucket) {
      PointError e{x, q, meas, pred, std::fabs(pred - meas) / meas, in_sample};
      rep.errors.push_back(e);
      bucket.push_back(e.rel_err);
      return &rep.errors.back();
    };
    auto with_req = [&](PointError* e, double pred_req, std::vector<double>& bucket) {
      if (x.gap_req_ns < 0) return;
      e->predicted_req = pred_req;
      e->rel_err_req = std::fabs(pred_req - e->measured) / e->measured;
      if (!e->in_sample) bucket.push_back(e->rel_err_req);
    };
    if (x.mode == "gap") {  // periodic (free-running) bursts: the Burst-Gap law, no capacity term
      const bool in = on_plateau(x);
      const double Gr = x.gap_req_ns * 1e-9;
      if (!in) ++rep.oos_points;
      if (x.period_ns > 0) {
        PointError* e = add("period", x.period_ns * 1e-9, bg::t_period(G, x.V, R, T0), in, gap_e);
        gap_pe.push_back(e->rel_err);
        (in ? pin : pout).push_back(e->rel_err);
        with_req(e, bg::t_period(Gr, x.V, R, T0), preq);
      }
      if (x.tiss_ns > 0) {
        PointError* e = add("tiss", x.tiss_ns * 1e-9, bg::tiss(G, x.V, R, T0), in, gap_e);
        gap_te.push_back(e->rel_err);
        (in ? tin : tout).push_back(e->rel_err);
        with_req(e, bg::tiss(Gr, x.V, R, T0), treq);
        rep.gap_tiss_max_abs_err = std::max(rep.gap_tiss_max_abs_err, std::fabs(e->predicted - e->measured));
      } else {
        rep.notes.push_back("validation: line " + std::to_string(x.line) + " (gap " + fmtd(x.gap_ns, 1) +
                            " ns) has T_iss = " + fmtd(x.tiss_ns, 1) + " ns <= 0 (period - measured gap); "
                            "its T_iss is not validated, its period is");
      }
    } else if (x.mode == "isolated") {  // aligned bursts from empty: the capacity law
      const bool in = iso_fit.count({x.K, x.V}) > 0;
      PointError* e = add("tiss", x.tiss_ns * 1e-9, bg::tiss_iso(x.V, R, T0, P.Q(x.K)), in, iso_e);
      (in ? iin : iout).push_back(e->rel_err);
    } else if (x.period_ns > 0) {
      add("period", x.period_ns * 1e-9, bg::t_period(0, x.V, R, T0), false, zg_e);
    }
  }
  auto stats = [](const std::vector<double>& v, double& med, double& mx) {
    med = median(v);
    mx = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  };
  stats(gap_e, rep.gap_median_err, rep.gap_max_err);
  stats(gap_pe, rep.gap_period_median_err, rep.gap_period_max_err);
  stats(gap_te, rep.gap_tiss_median_err, rep.gap_tiss_max_err);
  stats(iso_e, rep.iso_median_err, rep.iso_max_err);
  stats(zg_e, rep.zerogap_median_err, rep.zerogap_max_err);
  rep.gap_period_in = ErrStats::of(pin);
  rep.gap_period_oos = ErrStats::of(pout);
  rep.gap_tiss_in = ErrStats::of(tin);
  rep.gap_tiss_oos = ErrStats::of(tout);
  rep.gap_period_oos_req = ErrStats::of(preq);
  rep.gap_tiss_oos_req = ErrStats::of(treq);
  rep.iso_in = ErrStats::of(iin);
  rep.iso_oos = ErrStats::of(iout);

  // Local control: recovery must come from the remote path, so local T_iss should not depend on G.
  std::vector<double> lt;
  for (const auto& x : s)
    if (x.mode == "gap" && x.target == "local") lt.push_back(x.tiss_ns);
  if (lt.size() >= 2) {
    double lo = *std::min_element(lt.begin(), lt.end()), hi = *std::max_element(lt.begin(), lt.end());
    rep.notes.push_back("local control over the gap sweep: T_iss " + fmtd(lo, 1) + "-" + fmtd(hi, 1) +
                        " ns (spread " + fmtd(100 * (hi - lo) / lo, 0) + "%)");
  }
  return rep;
}

KneeCheck knee_check(const std::vector<Sample>& samples, const Platform& p, int K, const FitOptions& opt) {
  XSTAGE_REQUIRE(K > 0, "knee check: K must be positive, got ", K);
  std::map<double, std::vector<double>> rem, loc;
  for (const auto& x : samples)
    if (x.mode == "isolated" && x.K == K && x.path == opt.path && x.pattern == opt.pattern &&
        x.producer == opt.producer)
      (x.target == "remote" ? rem : loc)[x.V].push_back(x.tiss_ns * 1e-9);
  KneeCheck kc;
  kc.K = K;
  std::vector<double> ctl;
  for (auto& [V, ts] : rem) {
    const double T = median(ts);
    ctl.push_back(loc.count(V) ? median(loc.at(V)) : 0);
    const double T0 = p.tiss0(K, V), pred = bg::tiss_iso(V, p.R, T0, p.Q(K));
    if (kc.predicted_knee < 0 && pred > T0 * (1 + 1e-3)) kc.predicted_knee = int(kc.V.size());
    kc.V.push_back(V);
    kc.measured.push_back(T);
    kc.predicted.push_back(pred);
  }
  kc.measured_knee = find_knee(kc.V, kc.measured, ctl, p.R, opt);
  return kc;
}

int find_knee(const std::vector<double>& V, const std::vector<double>& T, const std::vector<double>& control,
              double R, const FitOptions& opt) {
  XSTAGE_REQUIRE(V.size() == T.size() && control.size() == V.size(), "find_knee: V, T and control differ in length");
  XSTAGE_REQUIRE(R > 0, "find_knee: R must be positive");
  const int n = int(V.size());
  // Drain-paced step: T_iss grows from the previous point at an issue rate dV/dT below knee_rate_ratio x R.
  auto paced = [&](int i) { return R * (T[i] - T[i - 1]) > (V[i] - V[i - 1]) / opt.knee_rate_ratio; };
  for (int i = 0; i < n; ++i) {
    const double ref = control[i] > 0 ? control[i] : (i > 0 ? T[i - 1] : 0);
    const bool jump = ref > 0 && T[i] > opt.knee_ratio * ref;
    if (jump || (i > 0 && paced(i) && (i + 1 == n || paced(i + 1)))) return i;
  }
  return -1;
}

nlohmann::json FitReport::to_json() const {
  nlohmann::json kn = nlohmann::json::array();
  for (const auto& k : knees)
    kn.push_back({{"K", k.K}, {"points", k.points}, {"largest_V_MB", k.largest_V / 1e6},
                  {"last_floor_V_MB", k.last_floor_V / 1e6}, {"knee_V_MB", k.knee_V / 1e6}, {"Q_MB", k.Q / 1e6},
                  {"Q_at_V_MB", k.Q_at_V / 1e6}, {"Q_determined", k.q_determined}, {"R_iso_GBps", k.R_iso / 1e9},
                  {"Q_tail_MB", k.Q_tail / 1e6}, {"note", k.note}});
  nlohmann::json t0s = nlohmann::json::array();
  for (const auto& t : tiss0_sources)
    t0s.push_back({{"K", t.K}, {"V_MB", t.V / 1e6}, {"tiss0_us", t.tiss0 * 1e6}, {"source", t.source},
                   {"points", t.points}, {"q_peak_MB", t.q_peak / 1e6}, {"Q_MB", t.Q / 1e6},
                   {"aligned_overflow", t.aligned_overflow}, {"in_table", t.in_table},
                   {"measured_us", t.measured * 1e6}});
  nlohmann::json errs = nlohmann::json::array();
  for (const auto& e : errors)
    errs.push_back({{"line", e.sample.line}, {"mode", e.sample.mode}, {"K", e.sample.K}, {"B", e.sample.B},
                    {"gap_ns", e.sample.gap_ns}, {"quantity", e.quantity}, {"measured_us", e.measured * 1e6},
                    {"predicted_us", e.predicted * 1e6}, {"rel_err", e.rel_err}, {"in_sample", e.in_sample},
                    {"predicted_requested_gap_us", e.predicted_req >= 0 ? nlohmann::json(e.predicted_req * 1e6) : nlohmann::json(nullptr)}});
  return {{"platform", platform.to_json()},
          {"r_fit", {{"points_used", r_points_used}, {"points_rejected", r_points_rejected},
                     {"rel_rmse", r_fit_rel_rmse}, {"launch_overhead_us", launch_overhead * 1e6}}},
          {"q_fit", {{"points_used", q_points_used}, {"rel_rmse", q_fit_rel_rmse}, {"lower_bound", q_lower_bound},
                     {"per_K", kn}}},
          {"plateaus_aligned_overflow", plateaus_aligned_overflow},
          {"tiss0_sources", t0s},
          {"tiss0_points_used", tiss0_points_used},
          {"prediction_error", {{"gap_median", gap_median_err}, {"gap_max", gap_max_err},
                                {"gap_period_median", gap_period_median_err},
                                {"gap_period_max", gap_period_max_err},
                                {"gap_tiss_median", gap_tiss_median_err}, {"gap_tiss_max", gap_tiss_max_err},
                                {"gap_tiss_max_abs_us", gap_tiss_max_abs_err * 1e6},
                                {"isolated_median", iso_median_err}, {"isolated_max", iso_max_err},
                                {"zerogap_period_median", zerogap_median_err},
                                {"zerogap_period_max", zerogap_max_err}}},
          {"validation",
           {{"gap_period_in_sample", gap_period_in.to_json()}, {"gap_period_oos", gap_period_oos.to_json()},
            {"gap_tiss_in_sample", gap_tiss_in.to_json()}, {"gap_tiss_oos", gap_tiss_oos.to_json()},
            {"gap_period_oos_requested_gap", gap_period_oos_req.to_json()},
            {"gap_tiss_oos_requested_gap", gap_tiss_oos_req.to_json()},
            {"isolated_in_sample", iso_in.to_json()}, {"isolated_oos", iso_oos.to_json()},
            {"oos_points", oos_points}}},
          {"errors", errs}, {"notes", notes}};
}

}  // namespace xstage::model
