#pragma once
// `xstage launch -n N -- cmd...`: starts N local ranks, one process per GPU, each with
// XSTAGE_RANK / XSTAGE_WORLD_SIZE / XSTAGE_LOCAL_RANK and the NCCL unique id in XSTAGE_NCCL_ID (hex).
// If one rank fails, the others are stopped (by their pids) so nothing hangs on a missing peer.
#include <map>
#include <string>
#include <vector>

namespace xstage::runtime {

struct LaunchOptions {
  int nproc = 2;
  std::vector<std::string> argv;              // program and arguments (argv[0] searched in PATH)
  std::map<std::string, std::string> extra_env;
  double timeout_s = 0;                       // 0: none; else kill all ranks after this long
};

// Returns 0 when every rank exited 0, else the first failing rank's exit status (128+signal when
// killed). UsageError for nproc < 1 or an empty command. `id_hex` is passed to every rank.
int launch_local(const LaunchOptions& opt, const std::string& id_hex);

}  // namespace xstage::runtime
