#pragma once
// How this process learns its place in the job: its rank, the world size, its local rank (which GPU),
// and where the NCCL unique id comes from. Pure host logic over an environment map, so the CPU tests
// cover every launcher without starting one.
//
// Recognised launchers, first match wins:
//   xstage   XSTAGE_RANK, XSTAGE_WORLD_SIZE, XSTAGE_LOCAL_RANK, XSTAGE_NCCL_ID (hex; `xstage launch`)
//   torchrun RANK, WORLD_SIZE, LOCAL_RANK          (job key: TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT)
//   mpirun   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (job key: OMPI_MCA_orte_hnp_uri / ess jobid)
//   Slurm    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (job key: SLURM_JOB_ID.SLURM_STEP_ID)
// Without XSTAGE_NCCL_ID, rank 0 writes the id to `<XSTAGE_ID_DIR or /tmp>/xstage-ncclid-<key>` and
// the other ranks wait for that file (XSTAGE_ID_TIMEOUT_S, default 60 s).
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace xstage::runtime {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

EnvLookup process_env();                                        // getenv
EnvLookup map_env(const std::map<std::string, std::string>& m);  // for tests (copies the map)

struct LaunchInfo {
  std::string launcher;   // "xstage", "torchrun", "mpirun", "slurm", or "none"
  int rank = 0, world_size = 1, local_rank = 0;
  std::string id_hex;     // the NCCL unique id, when the launcher passed it
  std::string id_file;    // otherwise: the rendezvous file rank 0 writes
  double id_timeout_s = 60;
};

// Detects the launcher. UsageError naming the variable when a value is not an integer, rank is out
// of [0, world_size), or a launcher's variables are only partly set.
LaunchInfo detect_launch(const EnvLookup& env);

// Hex round trip of the 128-byte ncclUniqueId (kept as raw bytes: no NCCL dependency here).
constexpr size_t kUniqueIdBytes = 128;
std::string to_hex(const unsigned char* bytes, size_t n);
// UsageError when the string is not exactly 2*n hex digits.
void from_hex(const std::string& hex, unsigned char* bytes, size_t n, const std::string& what);

}  // namespace xstage::runtime
