// GPU subcommands: `calibrate` (remote-store microbenchmarks + fit, SPEC §4) and `launch` (start N
// local ranks, one per GPU). Built without CUDA, both say so and exit 2.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "xstage/common/error.hpp"

#if XSTAGE_WITH_CUDA
#include "calibrate.hpp"
#endif

namespace xstage::cli {

void register_gpu_commands(CLI::App& app) {
  auto copt = std::make_shared<
#if XSTAGE_WITH_CUDA
      bench::CalibrateOptions
#else
      int
#endif
      >();
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
#if XSTAGE_WITH_CUDA
  cal->add_option("--nproc", copt->nproc, "start this many local ranks (not needed under xstage launch, torchrun, "
                                          "mpirun or srun)");
  cal->add_option("-o,--out", copt->out_dir, "output folder")->capture_default_str();
  cal->add_option("--only", copt->only, "run only test cases whose key contains this text (see --list)");
  cal->add_flag("--quick", copt->quick, "a few points per sweep (smoke test)");
  cal->add_option("--runs", copt->runs, "timed runs per point after one warm-up")->capture_default_str();
  cal->add_option("--timeout", copt->timeout_s, "seconds before any wait (device barrier, host sync, "
                                                 "rendezvous) fails with a message")->capture_default_str();
  cal->add_option("--machine", copt->machine, "machine description for the provenance");
  cal->add_flag("!--no-plots", copt->plots, "skip the PNG plots");
  cal->add_option("--anchor-mb", copt->anchor_mb, "size of the copy-engine and SM-copy anchors, MB")
      ->capture_default_str();
  cal->add_option("--refit", copt->refit, "redo the fit, validation, summary and plots of a finished run "
                                         "in this folder (no GPU needed)");
  cal->add_flag("--list", copt->list, "list the test cases and exit");
  cal->callback([copt] {
    int rc = bench::calibrate(*copt);
    if (rc) throw RuntimeError("calibrate failed (exit status " + std::to_string(rc) + ")");
  });
  lau->callback([nproc, cmd, ltimeout] {
    int rc = bench::launch(*nproc, *cmd, *ltimeout);
    if (rc) throw RuntimeError("launch: a rank failed (exit status " + std::to_string(rc) + ")");
  });
#else
  cal->allow_extras();
  auto no_cuda = [] {
    throw UsageError("this xstage was built without CUDA (nvcc not found at configure time): calibrate and "
                     "launch need a CUDA build on a machine with GPUs");
  };
  cal->callback(no_cuda);
  // The callback owns the option storage (CLI11 writes into it while parsing).
  lau->callback([nproc, cmd, ltimeout, no_cuda] { no_cuda(); });
#endif
}

}  // namespace xstage::cli
