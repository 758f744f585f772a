// Launcher detection from environment variables (see env.hpp for the table).
#include "xstage/runtime/env.hpp"

#include <cctype>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "xstage/common/error.hpp"

namespace xstage::runtime {
namespace {

int parse_int(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  XSTAGE_REQUIRE(v.has_value(), "environment variable ", name, " is not set");
  const std::string& s = *v;
  size_t pos = 0;
  int x = 0;
  try {
    x = std::stoi(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  XSTAGE_REQUIRE(!s.empty() && pos == s.size(), "environment variable ", name,
                 " must be an integer, got '", s, "'");
  return x;
}

// File names carry the job key; keep them to a safe alphabet.
std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

struct Scheme {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local;
  std::vector<const char*> keys;  // job key candidates, first present wins (joined when several listed with '+')
};

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup map_env(const std::map<std::string, std::string>& m) {
  return [m](const std::string& name) -> std::optional<std::string> {
    auto it = m.find(name);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

LaunchInfo detect_launch(const EnvLookup& env) {
  static const Scheme schemes[] = {
      {"xstage", "XSTAGE_RANK", "XSTAGE_WORLD_SIZE", "XSTAGE_LOCAL_RANK", {"XSTAGE_JOB_ID"}},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", {"TORCHELASTIC_RUN_ID", "MASTER_ADDR+MASTER_PORT"}},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri"}},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", {"SLURM_JOB_ID+SLURM_STEP_ID", "SLURM_JOB_ID"}},
  };
  LaunchInfo info;
  for (const Scheme& s : schemes) {
    bool has_rank = env(s.rank).has_value(), has_size = env(s.size).has_value();
    if (!has_rank && !has_size) continue;
    XSTAGE_REQUIRE(has_rank && has_size, s.launcher, " launch: ", has_rank ? s.size : s.rank,
                   " is not set but ", has_rank ? s.rank : s.size, " is");
    info.launcher = s.launcher;
    info.rank = parse_int(env, s.rank);
    info.world_size = parse_int(env, s.size);
    XSTAGE_REQUIRE(info.world_size >= 1, s.size, " must be >= 1, got ", info.world_size);
    XSTAGE_REQUIRE(info.rank >= 0 && info.rank < info.world_size, s.rank, " = ", info.rank,
                   " is outside [0, ", s.size, " = ", info.world_size, ")");
    // Without a local rank (e.g. a bare RANK/WORLD_SIZE on one node) the global rank picks the GPU.
    info.local_rank = env(s.local) ? parse_int(env, s.local) : info.rank;
    XSTAGE_REQUIRE(info.local_rank >= 0, s.local, " must be >= 0, got ", info.local_rank);
    if (auto id = env("XSTAGE_NCCL_ID")) {
      info.id_hex = *id;
    } else {
      std::string key;
      for (const char* cand : s.keys) {
        std::string joined;
        bool all = true;
        std::string_view c(cand);
        size_t start = 0;
        while (start <= c.size()) {
          size_t plus = c.find('+', start);
          std::string name(c.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start));
          auto v = env(name);
          if (!v) { all = false; break; }
          joined += (joined.empty() ? "" : "_") + *v;
          if (plus == std::string_view::npos) break;
          start = plus + 1;
        }
        if (all) { key = joined; break; }
      }
      XSTAGE_REQUIRE(!key.empty() || info.world_size == 1, s.launcher,
                     " launch without XSTAGE_NCCL_ID: set XSTAGE_JOB_ID (or the launcher's job id "
                     "variables) so the ranks can find a shared rendezvous file");
      std::string dir = env("XSTAGE_ID_DIR").value_or("/tmp");
      info.id_file = dir + "/xstage-ncclid-" + sanitize(key);
    }
    if (auto t = env("XSTAGE_ID_TIMEOUT_S")) {
      char* end = nullptr;
      double v = std::strtod(t->c_str(), &end);
      XSTAGE_REQUIRE(end && *end == '\0' && !t->empty() && v > 0, "XSTAGE_ID_TIMEOUT_S must be a positive number, got '", *t, "'");
      info.id_timeout_s = v;
    }
    return info;
  }
  info.launcher = "none";
  return info;
}

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[bytes[i] >> 4];
    s[2 * i + 1] = digits[bytes[i] & 15];
  }
  return s;
}

void from_hex(const std::string& hex, unsigned char* bytes, size_t n, const std::string& what) {
  XSTAGE_REQUIRE(hex.size() == 2 * n, what, " must be ", 2 * n, " hex digits, got ", hex.size());
  auto nib = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw UsageError(detail::concat(what, " contains a non-hex character '", c, "'"));
  };
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
}

}  // namespace xstage::runtime
