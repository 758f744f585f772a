#pragma once
// The platform model M_X = (T_iss^0(K,V), R, Q(K)) of one machine (SPEC §2), with provenance.
// Units inside the library are SI: seconds, bytes, bytes/second. Printing converts.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xstage::model {

// Where a platform's numbers came from.
struct Provenance {
  std::string machine;  // e.g. "nvidia-h200-x2 (2x NVIDIA H200, NV18)"
  std::string date;     // ISO date of the measurement
  std::string command;  // the command that produced it
  std::string source;   // "probe", "calibration", "paper", ...
  std::string note;     // free text (e.g. "probe values until our own calibration replaces them")
};

// One measured T_iss^0 point: K producers, aggregate burst volume V, no-backpressure issue time.
struct Tiss0Point {
  int K = 0;
  double V = 0;      // bytes
  double tiss0 = 0;  // seconds
};

// One measured capacity point: Q(K).
struct QPoint {
  int K = 0;
  double Q = 0;  // bytes
};

class Platform {
 public:
  std::string name;
  Provenance provenance;
  int sm_count = 0;        // producers per GPU at K = "one per SM" (read from the device when calibrated)
  int world_size = 0;      // ranks in the calibration run (0: not recorded)
  double R = 0;            // effective aggregate drain rate, bytes/s
  std::vector<Tiss0Point> tiss0_table;  // measured T_iss^0(K, V)
  std::vector<QPoint> q_table;          // measured Q(K)
  // Optional measured dense tensor-core rates per GPU, FLOP/s (0: unknown). The design tests derive
  // MMA times from them (rate per SM = rate / sm_count) unless a rate is given explicitly.
  double tc_bf16 = 0, tc_fp8 = 0, attn_bf16 = 0;
  // Optional measured HBM read rate per GPU, bytes/s (0: unknown): the memory floor of `xstage design moe-bound`
  // (xstage/moe/layer_bound.hpp). JSON: memory_tbps.hbm_read in TB/s.
  double hbm_read = 0;

  // T_iss^0(K, V): interpolated in the measured table (linear in V within the K rows that bracket K,
  // then linear in K; clamped at the table's K edges). Below a row's smallest V the row's first value
  // is used (the fixed issue floor); above its largest V the last point's per-byte issue cost is
  // extended (T proportional to V: issue is rate-limited once the floor is amortised).
  // Throws UsageError for K <= 0 or V <= 0.
  double tiss0(int K, double V) const;
  // Q(K): linear interpolation in K over the measured points, clamped at the ends.
  double Q(int K) const;

  // Throws UsageError naming the first bad field (R <= 0, empty tables, non-positive entries...).
  void validate() const;

  nlohmann::json to_json() const;
  static Platform from_json(const nlohmann::json& j);  // validates; UsageError on bad content

  // A preset name ("h200-nvlink4", "paper-b200") or a path to a platform JSON file.
  // UsageError for an unknown name or an unreadable/malformed file.
  static Platform load(const std::string& name_or_path);
  void save(const std::string& path) const;
};

// Rows of one K in the T_iss^0 table, sorted by V (helper for printing and tests).
std::vector<Tiss0Point> tiss0_row(const Platform& p, int K);

std::vector<std::string> preset_names();
Platform preset(const std::string& name);  // UsageError for an unknown name, listing the known ones

}  // namespace xstage::model
