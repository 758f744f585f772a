#pragma once
// `xstage calibrate`: run the microbenchmark sweeps on every rank, write the raw CSV, fit M_X
// (model::fit_platform), validate it without refitting, write the platform JSON, summary and plots
// (the host half, calib::report in src/calib_host; `--refit` calls it without CUDA).
#include <string>
#include <vector>

namespace xstage::bench {

struct CalibrateOptions {
  int nproc = 0;                       // > 0: start this many local ranks (when not already launched)
  std::string out_dir = "results/calibration";
  std::string only;                    // run only test cases whose key contains this text
  bool quick = false;                  // a few points per sweep (tests, smoke runs)
  int runs = 3;                        // timed runs per configuration
  double timeout_s = 30;               // every wait (device barriers, host syncs, rendezvous)
  std::string machine;                 // provenance; default: GPU name x world size
  bool plots = true;
  int anchor_mb = 256;                 // copy-engine / SM-copy anchor size
  bool list = false;                   // print the test cases (those --only selects) and exit
};

// Returns the process exit code. Collective over the ranks of one launch.
int calibrate(const CalibrateOptions& opt);

// `xstage launch -n N -- cmd...`
int launch(int nproc, const std::vector<std::string>& cmd, double timeout_s);

}  // namespace xstage::bench
