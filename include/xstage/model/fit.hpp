#pragma once
// Calibration fitting (SPEC §4): R from drain-dominated zero-gap points, T_iss^0 from the large-gap
// plateaus of periodic bursts (every V: free-running periodic bursts never form one aligned burst, so the
// capacity term does not apply to them) and from the isolated floor, Q(K) as the outstanding volume held
// at the isolated (aligned) burst knee; then the model's prediction error on every other point with
// nothing refitted: periodic points with the Burst-Gap law, isolated points with the capacity law.
// Estimators and rules: docs/MODEL.md §7.
//
// Sample CSV schema (header row required, columns by name, extra columns ignored):
//   mode      zerogap | gap | isolated
//   target    remote | local           (local = the control with a local destination)
//   K         producers (int > 0)
//   B         bytes per producer per burst (> 0)
//   V         aggregate burst volume K*B, bytes
//   gap_ns    producer-side gap G between bursts, ns (0 for zerogap and isolated)
//   tiss_ns   sender-visible issue span of one burst, ns (aggregate: first start to last end)
//   period_ns start-to-start period of periodic bursts, ns (0 when not applicable)
//   wall_us   kernel wall time for the whole run of `bursts` bursts, us (0 when not measured)
// optional:
//   bursts    bursts per run (when absent: FitOptions::default_bursts)
//   path      st | tma          (store path; default st)
//   pattern   p2p | a2a         (one peer, or every rank to every peer; default p2p)
//   producer  cta | warp        (default cta)
//   wrong     bytes that did not land correctly (must be 0)
//   gap_req_ns the requested producer-side gap of a gap row, ns (the validation also predicts with it)
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "xstage/model/platform.hpp"

namespace xstage::model {

struct Sample {
  std::string mode, target;
  int K = 0;
  double B = 0, V = 0;
  double gap_ns = 0, tiss_ns = 0, period_ns = 0, wall_us = 0;
  int bursts = 0;
  std::string path = "st", pattern = "p2p", producer = "cta";
  long long wrong = 0;
  double gap_req_ns = -1;  // requested gap of a gap row (column gap_req_ns); -1: not recorded
  int line = 0;  // 1-based line in the CSV (for error messages)
};

// Reads and validates a sample CSV. UsageError naming file, line and column on malformed input.
std::vector<Sample> read_samples_csv(const std::string& path, int default_bursts = 64);
std::vector<Sample> parse_samples_csv(const std::string& text, const std::string& origin,
                                      int default_bursts = 64);
void write_samples_csv(const std::string& path, const std::vector<Sample>& samples);

struct FitOptions {
  int default_bursts = 64;
  std::string path = "st";      // which store path / pattern / producer to fit (others reported apart)
  std::string pattern = "p2p";
  std::string producer = "cta";
  // Added: the fitted platform's identity. sm_count 0 = the largest K in the samples (calibration runs
  // one producer per SM at most); world_size 0 = not recorded.
  std::string name = "fitted";
  int sm_count = 0;
  int world_size = 0;
  // Added: rules (documented in docs/MODEL.md §Fitting).
  double drain_ratio = 2.0;      // zero-gap point is drain-dominated if wall_remote >= ratio * wall_local
  double plateau_margin = 1.05;  // gap point is on the plateau if G >= margin * V/R (then T_iss = T_iss^0)
  double knee_ratio = 1.5;       // isolated point is past the knee if T_iss > ratio * its no-backpressure floor
  // ... or if T_iss grows from the previous swept point at an issue rate dV/dT below knee_rate_ratio * R
  // (on the floor issue outruns the drain; past the knee it is paced by the drain, dV/dT = R).
  double knee_rate_ratio = 2.0;
};

// The isolated sweep of one K, as the fit read it (docs/MODEL.md §7, step 3).
struct KneeFit {
  int K = 0;
  int points = 0;            // isolated remote points (distinct V) of this K
  double largest_V = 0;      // bytes
  double last_floor_V = 0;   // largest V still on the no-backpressure floor (0: none)
  double knee_V = 0;         // first V past the knee (0: no knee within the sweep)
  // Q: the largest outstanding volume V - R*T_iss that a burst of the sweep held at the end of its issue,
  // over the points up to the knee (where the bound is tight). q_determined = false: no knee in the
  // sweep (or V - R*T_iss still rising at its largest V), Q is only a lower bound.
  double Q = 0;              // bytes
  double Q_at_V = 0;         // V of the point that gave Q
  bool q_determined = false;
  // Diagnostic: the isolated past-knee slope dV/dT_iss (unweighted least squares over the points from the
  // knee on) and the intercept of that line, T = (V - Q_tail)/R_iso. 0 when fewer than 3 points.
  double R_iso = 0, Q_tail = 0;
  std::string note;          // one line: what was found
};

// The knee of one isolated sweep (points sorted by V; control[i] = local control's T_iss, 0 = none):
// index of the first point that leaves the no-backpressure floor, -1 if none. A point leaves it by a jump
// (T_iss > knee_ratio x its local control, or without a control x the previous point's) or by a
// drain-paced step (T_iss grows from the previous point at an issue rate dV/dT below knee_rate_ratio x R)
// confirmed by the next step being drain-paced too (past the knee every step is; one slow floor step is
// noise). The fit, the knee check and `xstage calibrate` use this one rule (docs/MODEL.md §7).
int find_knee(const std::vector<double>& V, const std::vector<double>& T, const std::vector<double>& control,
              double R, const FitOptions& opt);

// Measured vs predicted isolated knee of one K (calibration's knee check). Indices into V (sorted).
struct KneeCheck {
  int K = 0;
  std::vector<double> V, measured, predicted;  // bytes, seconds, seconds
  // Measured: find_knee() on the measured sweep with the platform's R (where the issue leaves the floor
  // by a jump or becomes drain-paced). Predicted: first V whose model T_iss^iso = max(T_iss^0, (V - Q)/R)
  // leaves T_iss^0(K,V) (by > 0.1 %), i.e. where the model's issue becomes drain-paced.
  int measured_knee = -1, predicted_knee = -1;  // -1: none in the sweep
  int steps_apart() const { return measured_knee >= 0 && predicted_knee >= 0 ? std::abs(measured_knee - predicted_knee) : -1; }
};

// Model vs measurement for one point, nothing refitted.
struct PointError {
  Sample sample;
  std::string quantity;  // "period" or "tiss"
  double measured = 0, predicted = 0;  // seconds; predicted with the measured gap (gap rows)
  double rel_err = 0;                  // |pred - meas| / meas
  // in_sample: the point was used to fit the parameter that decides its prediction (a gap plateau point
  // behind a T_iss^0 table entry, an isolated floor point in the table, the isolated point that gave Q):
  // its error is not a validation. Gap rows with a requested gap: the prediction from it (-1: none).
  bool in_sample = false;
  double predicted_req = -1, rel_err_req = -1;
};

// Median and maximum of a set of relative errors; n = 0: no data ("n/a", JSON null).
struct ErrStats {
  int n = 0;
  double median = 0, max = 0;
  static ErrStats of(std::vector<double> v);
  nlohmann::json to_json() const;  // {"n", "median", "max"}, median/max null when n = 0
  std::string text() const;        // "median 1.4 %, max 10.3 % (n = 25)" or "n/a (no points)"
};

struct FitReport {
  Platform platform;
  // R fit
  int r_points_used = 0, r_points_rejected = 0;
  double r_fit_rel_rmse = 0;
  double launch_overhead = 0;  // seconds, intercept of the wall-time regression
  // validation
  std::vector<PointError> errors;
  double gap_median_err = 0, gap_max_err = 0;  // gap sweep, period and T_iss together
  // The same split by quantity. The period is the law's well-conditioned quantity (T_iss = period - G is a
  // small difference near the corner G = V/R - T_iss^0, where a 3 % error in R is a 40 % error in T_iss).
  double gap_period_median_err = 0, gap_period_max_err = 0;
  double gap_tiss_median_err = 0, gap_tiss_max_err = 0, gap_tiss_max_abs_err = 0;  // abs: seconds
  double iso_median_err = 0, iso_max_err = 0;
  // Added: per-producer zero-gap periods vs V/R (biased for K < all SMs: see docs/MODEL.md), and the
  // fit quality of Q (relative RMSE of T_iss over the points past the knee).
  double zerogap_median_err = 0, zerogap_max_err = 0;
  double q_fit_rel_rmse = 0;
  int q_points_used = 0, tiss0_points_used = 0;
  // In-sample vs out-of-sample (PointError::in_sample). Gap sweep with the measured gap (period, T_iss),
  // and out of sample with the requested gap (what a user of the model knows); isolated bursts.
  ErrStats gap_period_in, gap_period_oos, gap_tiss_in, gap_tiss_oos, gap_period_oos_req, gap_tiss_oos_req;
  ErrStats iso_in, iso_oos;
  int oos_points = 0;  // gap-sweep points out of sample (each gives a period and, if T_iss > 0, a T_iss)
  // Per-K isolated sweeps; q_lower_bound: no K had a knee, so the platform's Q table holds lower bounds.
  std::vector<KneeFit> knees;
  bool q_lower_bound = false;
  // Where each T_iss^0 table entry came from. Gap plateaus are used for every V; aligned_overflow marks a
  // V whose aligned (isolated) burst would overflow Q(K) (q_peak = V - R*T_iss^0 > Q): periodic bursts of
  // that V still issue in T_iss^0 (they drift apart), an aligned one in (V - Q)/R (the capacity bound).
  // Sources are kept apart: a K row of the table holds the gap plateaus when that K has any (periodic
  // bursts: the Burst-Gap law's T_iss^0), else the isolated floor (aligned bursts, a higher floor); the
  // isolated floor points of a plateau row are listed with in_table = false. Each row is then made
  // non-decreasing in V (pool-adjacent-violators, weighted by points): tiss0 is the table value, measured
  // the median before that.
  struct Tiss0Source {
    int K = 0;
    double V = 0, tiss0 = 0;        // bytes, seconds
    std::string source;             // "gap plateau" | "isolated floor"
    int points = 0;                 // samples behind it
    double q_peak = 0, Q = 0;       // bytes
    bool aligned_overflow = false;
    bool in_table = true;
    double measured = 0;            // seconds (before the monotone fit)
  };
  std::vector<Tiss0Source> tiss0_sources;
  int plateaus_aligned_overflow = 0;  // gap plateaus used whose V would overflow Q as an aligned burst
  std::vector<std::string> notes;  // rules applied, points rejected and why
  nlohmann::json to_json() const;
};

// Throws UsageError when the samples cannot determine a parameter (no zero-gap remote points, no isolated
// remote points, no T_iss^0 point). A sweep without a knee is not an error: Q is then a lower bound.
FitReport fit_platform(const std::vector<Sample>& samples, const FitOptions& opt,
                       const Provenance& provenance);

// Knee check of the isolated remote sweep of K in the samples of opt's path/pattern/producer, with the
// platform's parameters (nothing refitted). K.V empty when there is no such sweep.
KneeCheck knee_check(const std::vector<Sample>& samples, const Platform& p, int K, const FitOptions& opt);

}  // namespace xstage::model
