#pragma once
// The CUDA and NCCL versions a build was compiled against and the ones it runs on. A result file records both
// (summary.json's "software"): a driver or libnccl other than the build's is a usual first suspect when two runs'
// numbers differ. The text forms are host-only and tested on the CPU; software_versions() needs the CUDA runtime.
#include <string>

#include <nlohmann/json.hpp>

#include "xstage/common/version.hpp"

namespace xstage::runtime {

struct SoftwareVersions {
  int cuda_build = 0;    // CUDART_VERSION at compile time (13000: 13.0)
  int cuda_runtime = 0;  // cudaRuntimeGetVersion
  int cuda_driver = 0;   // cudaDriverGetVersion: the newest CUDA the driver supports; 0 where none is installed
  int nccl_build = 0;    // NCCL_VERSION_CODE at compile time (22803: 2.28.3)
  int nccl_runtime = 0;  // ncclGetVersion of the libnccl loaded
};

// Never throws and starts no GPU work: a query that fails leaves its field 0 ("none").
SoftwareVersions software_versions();

// CUDA's encoding: 1000 * major + 10 * minor (12090: "12.9").
inline std::string cuda_version_text(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// NCCL's encoding since 2.9: 10000 * major + 100 * minor + patch (22803: "2.28.3"); before it 1000 * major +
// 100 * minor + patch (2708: "2.7.8").
inline std::string nccl_version_text(int v) {
  if (v <= 0) return "none";
  const bool old = v < 10000;
  const int major = old ? v / 1000 : v / 10000, minor = old ? v % 1000 / 100 : v % 10000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

inline nlohmann::json to_json(const SoftwareVersions& s) {
  return {{"xstage", version()},
          {"git", git_revision()},
          {"cuda_build", cuda_version_text(s.cuda_build)},
          {"cuda_runtime", cuda_version_text(s.cuda_runtime)},
          {"cuda_driver", cuda_version_text(s.cuda_driver)},
          {"nccl_build", nccl_version_text(s.nccl_build)},
          {"nccl_runtime", nccl_version_text(s.nccl_runtime)}};
}

// The lines `xstage --version` prints after version_line() in a CUDA build.
inline std::string to_text(const SoftwareVersions& s) {
  return "built with CUDA " + cuda_version_text(s.cuda_build) + " and NCCL " + nccl_version_text(s.nccl_build) +
         "\nrunning CUDA runtime " + cuda_version_text(s.cuda_runtime) + ", driver " +
         (s.cuda_driver > 0 ? "for CUDA " + cuda_version_text(s.cuda_driver) : std::string("none")) + ", NCCL " +
         nccl_version_text(s.nccl_runtime);
}

}  // namespace xstage::runtime
