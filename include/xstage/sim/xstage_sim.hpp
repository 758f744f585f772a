#pragma once
// Discrete-event (fluid) simulation of the X-Stage (SPEC §1-3, §5): K producers issue remote-store
// bursts into one shared, finite outstanding capacity Q that drains work-conserving at rate R.
// Each producer is a CTA with two roles joined by a finite local staging depth (double buffer = 2):
//   MMA role:      runs its tiles' mainloops in order. Tile i starts when the previous mainloop is done,
//                  its dependency group (if any) is complete, and a staging slot is free (the epilogue of
//                  tile i - depth has finished issuing).
//   epilogue role: takes tiles in order once their mainloop is done; spends epi_time on local work
//                  (staging cost), then issues remote_bytes. With no backpressure a tile of b bytes issues
//                  in t0(b) = T_iss^0(K, K*b) (a per-producer issue rate b/t0). Issue adds to the shared
//                  outstanding volume q; while q = Q and the offered issue rate exceeds R, the producers
//                  issuing share R in proportion to their own issue rates. The slot is released and the
//                  tile's dependency group credited when its last byte is issued.
// Rules, units and invariants: docs/SIMULATOR.md. Units are SI (s, bytes, bytes/s).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xstage::model {
class Platform;
}

namespace xstage::sim {

struct SimTile {
  int kind = 0;             // a label for reporting (MoE: 0 = L1, 1 = L2)
  double mma_time = 0;      // tensor-core mainloop, s
  double epi_time = 0;      // local epilogue work before the remote issue (staging cost), s
  double remote_bytes = 0;  // bytes the epilogue issues to peers
  int produces = -1;        // dependency group this tile completes (-1: none)
  int waits = -1;           // group whose every producing tile must be done before this mainloop (-1: none)
};

struct SimConfig {
  double R = 0;  // drain rate, bytes/s; +infinity models a local-like destination (never backs up)
  double Q = 0;  // outstanding capacity, bytes (>= 0; +infinity: unbounded)
  // No-backpressure issue time of one producer's burst of b bytes (must be > 0 for b > 0).
  std::function<double(double bytes)> tiss0;
  int staging_depth = 2;                // local staging slots between MMA and epilogue (>= 1)
  std::vector<std::string> kind_names;  // optional names of SimTile::kind for reports

  // R, Q(K) and t0(b) = T_iss^0(K, K*b) of a platform with K concurrent producers.
  static SimConfig from_platform(const model::Platform& p, int K, int staging_depth = 2);
};

// What happened to one tile.
struct TileRecord {
  int producer = 0, index = 0, kind = 0;
  double mma_start = 0, mma_end = 0;
  double starvation = 0;  // time the MMA role was free but waited for the tile's dependency group
  double mma_stall = 0;   // time the MMA role was free (and the dependency met) but had no staging slot
  double epi_start = 0;   // epilogue takes the tile
  double issue_start = 0, issue_end = 0;  // remote issue span (equal when remote_bytes = 0)
  double bytes = 0;
  double tiss0 = 0;  // no-backpressure issue time of this burst
  double tiss() const { return issue_end - issue_start; }
  double t_rs() const { return issue_end - epi_start; }  // epilogue span: staging + issue
};

struct ProducerStats {
  double mma_busy = 0, mma_stall = 0, starvation = 0;
  double finish = 0;  // last byte issued
};

struct KindSummary {
  std::string name;
  int tiles = 0, bursts = 0;  // bursts: tiles with remote bytes
  double mma_time = 0;        // sum of mainloops
  double tiss_mean = 0, tiss_median = 0, tiss_max = 0, tiss0_mean = 0;
  double t_rs_mean = 0, t_rs_median = 0, t_rs_max = 0;
  double mma_stall_before = 0;  // MMA stall (slot wait) charged to the tiles of this kind
  double starvation = 0;
};

struct SimResult {
  int producers = 0;
  double issue_end = 0;   // last byte issued (sender-visible end)
  double drain_end = 0;   // last byte drained (remote-visible end)
  double total_time = 0;  // max(issue_end, drain_end)
  double peak_outstanding = 0;
  double mma_stall_total = 0, starvation_total = 0;    // summed over producers
  double mma_stall_max = 0, starvation_max = 0;        // worst producer
  std::vector<TileRecord> tiles;                        // producer-major, in program order
  std::vector<ProducerStats> per_producer;
  std::map<int, KindSummary> kinds;
  // burst_tiss[j]: mean T_iss over producers of their j-th burst (shows start-up transients).
  std::vector<double> burst_tiss;

  nlohmann::json to_json(bool with_tiles = false) const;
};

// Runs the simulation. Throws UsageError for invalid input (negative times, R <= 0, a waited group no
// tile produces, ...) and for a schedule that deadlocks (names the stuck producer, tile and group).
SimResult simulate(const SimConfig& cfg, const std::vector<std::vector<SimTile>>& producers);

}  // namespace xstage::sim
