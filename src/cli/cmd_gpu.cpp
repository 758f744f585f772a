// GPU subcommands: `calibrate` (remote-store microbenchmarks + fit, SPEC §4) and `launch` (start N
// local ranks, one per GPU). `calibrate --refit DIR` (fit, validate and plot a finished run again) needs
// no GPU and works in every build; measuring and `launch` need a CUDA build.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "report.hpp"
#include "xstage/common/error.hpp"
#include "xstage/common/version.hpp"

#if XSTAGE_WITH_CUDA
#include "calibrate.hpp"
#include "xstage/runtime/versions.hpp"
#endif

namespace xstage::cli {
namespace {

constexpr const char* kNoCuda =
    "this xstage was built without CUDA (nvcc not found at configure time): measuring with calibrate and "
    "launch need a CUDA build on a machine with GPUs (calibrate --refit DIR works here)";

struct CalOpts {
  int nproc = 0, runs = 3, anchor_mb = 256;
  std::string out_dir = "results/calibration", only, machine, refit;
  bool quick = false, plots = true, list = false;
  double timeout_s = 30;
};

}  // namespace

std::string version_text() {
#if XSTAGE_WITH_CUDA
  return version_line() + "\n" + runtime::to_text(runtime::software_versions());
#else
  return version_line() + "\nbuilt without CUDA (the model, simulator and calibrate --refit only)";
#endif
}

void register_gpu_commands(CLI::App& app) {
  auto o = std::make_shared<CalOpts>();
  auto* cal = app.add_subcommand("calibrate",
                                 "Measure M_X = (T_iss^0(K,V), R, Q(K)) on this machine's GPUs over NCCL, fit "
                                 "and validate the Burst-Gap model; writes CSV, platform JSON, summary and plots");
  auto* lau = app.add_subcommand("launch", "Start N local ranks (one process per GPU) of a command, passing the "
                                            "NCCL unique id in XSTAGE_NCCL_ID");
  auto nproc = std::make_shared<int>(2);
  auto cmd = std::make_shared<std::vector<std::string>>();
  auto ltimeout = std::make_shared<double>(0);
  lau->add_option("-n,--nproc", *nproc, "ranks to start (<= visible GPUs)")->required();
  lau->add_option("--timeout", *ltimeout, "stop every rank after this many seconds (0: none)");
  lau->add_option("cmd", *cmd, "command and its arguments (after --)")->required();

  cal->add_option("--nproc", o->nproc, "start this many local ranks (not needed under xstage launch, torchrun, "
                                       "mpirun or srun)");
  auto* out = cal->add_option("-o,--out", o->out_dir, "output folder (with --refit: where to write; without -o "
                                                       "--refit writes nothing)")
                  ->capture_default_str();
  cal->add_option("--only", o->only, "run only test cases whose key contains this text (see --list)");
  cal->add_flag("--quick", o->quick, "a few points per sweep (smoke test)");
  cal->add_option("--runs", o->runs, "timed runs per point after one warm-up")->capture_default_str();
  cal->add_option("--timeout", o->timeout_s, "seconds before any wait (device barrier, host sync, "
                                             "rendezvous) fails with a message")->capture_default_str();
  cal->add_option("--machine", o->machine, "machine description for the provenance");
  cal->add_flag("!--no-plots", o->plots, "skip the PNG plots");
  cal->add_option("--anchor-mb", o->anchor_mb, "size of the copy-engine and SM-copy anchors, MB")
      ->capture_default_str();
  auto* refit = cal->add_option("--refit", o->refit, "redo the fit, validation, summary and plots of a finished run "
                                                     "in this folder (no GPU needed); writes only into -o");
  cal->add_flag("--list", o->list, "list the test cases (those --only selects) and exit");
  refit->excludes("--list")->excludes("--nproc")->excludes("--only")->excludes("--quick")->excludes("--runs")
      ->excludes("--machine")->excludes("--anchor-mb");
  cal->callback([o, out, refit] {
    if (refit->count()) {  // (an empty -o is refused by name before this: main.cpp's refuse_empty_values)
      const int rc = calib::refit(o->refit, out->count() ? o->out_dir : "", o->plots);
      if (rc) throw RuntimeError("calibrate --refit: the fit failed (exit status " + std::to_string(rc) + ")");
      return;
    }
    XSTAGE_REQUIRE(!o->out_dir.empty(), "-o: empty folder name");
#if XSTAGE_WITH_CUDA
    bench::CalibrateOptions c;
    c.nproc = o->nproc;
    c.out_dir = o->out_dir;
    c.only = o->only;
    c.quick = o->quick;
    c.runs = o->runs;
    c.timeout_s = o->timeout_s;
    c.machine = o->machine;
    c.plots = o->plots;
    c.anchor_mb = o->anchor_mb;
    c.list = o->list;
    const int rc = bench::calibrate(c);
    if (rc) throw RuntimeError("calibrate failed (exit status " + std::to_string(rc) + ")");
#else
    throw UsageError(kNoCuda);
#endif
  });
#if XSTAGE_WITH_CUDA
  lau->callback([nproc, cmd, ltimeout] {
    int rc = bench::launch(*nproc, *cmd, *ltimeout);
    if (rc) throw RuntimeError("launch: a rank failed (exit status " + std::to_string(rc) + ")");
  });
#else
  // The callback owns the option storage (CLI11 writes into it while parsing).
  lau->callback([nproc, cmd, ltimeout] { throw UsageError(kNoCuda); });
#endif
}

}  // namespace xstage::cli
