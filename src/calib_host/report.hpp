#pragma once
// The host half of `xstage calibrate`: from the measured points of a run (or its calibration.csv) to the
// fit, the validation (in and out of sample), summary.json, platform.json, fit.json, validation.csv and
// the plots. Needs no GPU and no CUDA: `xstage calibrate --refit DIR` runs it in any build.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xstage::calib {

// One measured configuration, as calibration.csv records it (the columns the report reads).
struct RunPoint {
  std::string mode, path = "st", pattern = "p2p", producer = "cta";
  bool local = false;
  int K = 0, bursts = 0, src = 0, dst = 1;
  double B = 0, tiss_ns = 0, wall_us = 0;
  long long wrong = 0;
};

// Reads a calibration.csv written by `xstage calibrate` (UsageError naming the file and line).
std::vector<RunPoint> read_points(const std::string& csv);

struct ReportOptions {
  std::string out_dir;  // where summary.json, platform.json, fit.json, validation.csv, fig3*.png go; empty: print only
  bool plots = true;
};

// csv: the run's calibration.csv; summary: the run's provenance (machine, command, date, world_size,
// sm_count, copy_engine_GBps, ...), completed and written to out_dir/summary.json. Prints the report.
// Returns the exit code (1: wrong bytes or the base family could not be fitted).
int report(const std::string& csv, const std::vector<RunPoint>& pts, nlohmann::json summary, const ReportOptions& opt);

// `xstage calibrate --refit DIR [-o OUT]`: report() on DIR/calibration.csv with DIR/summary.json's
// provenance; writes into OUT (empty: prints only, nothing written). OUT may equal DIR.
int refit(const std::string& dir, const std::string& out_dir, bool plots);

// The plotting command (a python3 with matplotlib running scripts/plot_calibration.py DIR); "" when there
// is no such python3 or no script.
std::string plot_command(const std::string& dir);

}  // namespace xstage::calib
