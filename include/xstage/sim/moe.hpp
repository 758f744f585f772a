#pragma once
// A MoE layer (SPEC §5) turned into per-producer tile sequences for the X-Stage simulator, under the
// Expert-Wave and the Interleaved schedulers (include/xstage/sched/moe_scheduler.hpp).
//
// One rank is simulated: the most loaded one after routing (the layer ends when it ends). Its K
// producers are CTAs, one per SM; `roles` CTAs form one scheduler instance. L1 tiles (hidden ->
// 2*h_inter, gate/up) write locally and complete their row's dependency group; L2 tiles (h_inter ->
// hidden) wait for their row's L1 tiles and issue the combine: tokens_in_row * l2_cols * out_bytes bytes,
// of which the remote fraction (P-1)/P goes over NVLink.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "xstage/sched/moe_layout.hpp"
#include "xstage/sim/xstage_sim.hpp"

namespace xstage::model {
class Platform;
}

namespace xstage::sim {

struct MoeLayerConfig {
  int hidden = 0;           // model dimension
  int h_inter = 0;          // expert intermediate size
  int experts = 0;          // total experts (E; E/P local experts per rank)
  int tokens_per_rank = 0;  // tokens each rank routes
  int topk = 0;
  std::string routing = "balanced";  // balanced (exactly even) | uniform | skewed (route_tokens)
  double skew = 1.0;                 // Zipf exponent of expert popularity for skewed routing
  std::uint64_t seed = 1;            // skewed routing: popularity order and sampling
  int b_m = 128, b_n = 128;          // tile shape
  // Output columns of one L1 / L2 tile; 0: b_n (SPEC §5's tiles). The xstage kernel (src/kernels/moe): L1 tiles
  // of 2 b_n (b_n gate + b_n up columns), L2 tiles of moe_kernel::moe_l2_cols (256 where hidden % 512 == 0 or
  // hidden / 128 is odd; l2_cols a multiple of b_n, ceil(hidden / l2_cols) tiles per row, the last one ragged: a
  // whole tile's mainloop; its combine burst is counted at l2_cols columns too, an overestimate of one tile per row).
  int l1_cols = 0, l2_cols = 0;
  int dtype_bytes = 1;               // MMA operand bytes: 1 -> the platform's fp8 rate, 2 -> bf16
  int out_bytes = 2;                 // combine output element bytes (bf16)
  double tc_rate = 0;                // dense tensor-core FLOP/s per GPU; 0: the platform's rate
  int world = 2;                     // P ranks (remote fraction (P-1)/P)
  int sms = 0;                       // producers K (one CTA per SM); 0: the platform's sm_count
  int roles = 1;                     // CTAs per scheduler instance (1 or 2)
  int lead = -1;                     // D for the interleaved scheduler; -1: D_knee
  int experts_per_wave = 0;          // Expert-Wave grouping; 0: enough experts that L1 fills every instance
  int wave_lag = 0;                  // Expert-Wave: 1 = a wave's L2 tiles after the next wave's L1 tiles
  int staging = 2;                   // local staging depth (double buffer)
  double epi_time = 0;               // fixed per-tile epilogue staging cost, s
  // Measured MMA-side time of one L1 / L2 tile, s (0: its FLOPs at tc_rate): a kernel's own mainloop plus whatever
  // holds its MMA side before the next tile (bench_moe --trace: a kind's us/tile plus its gap to the next mainloop,
  // scripts/moe-trace-kinds.py), so the simulation runs on a measured kernel's tile times, not the dense rate.
  double t_l1 = 0, t_l2 = 0;
  // Memory guard: refuse (UsageError, before simulating) a layer whose simulation would need more than
  // memory_limit bytes (0: no limit); json_tiles: the caller will also print every tile as JSON.
  double memory_limit = 0;
  bool json_tiles = false;
};

// Bytes the simulation of one layer needs, from its tile count (both schedules): the tile records, and
// with json_tiles the JSON tree and text of every tile. Measured on x86-64 (docs/SIMULATOR.md).
double moe_sim_bytes(long long tiles_per_schedule, bool json_tiles);

// Tokens per expert (all E experts) after top-k routing of world * tokens_per_rank tokens.
// balanced: token t takes experts (t*topk + j) mod E, j < topk (exactly even up to one token);
// uniform: each token's experts a uniform random k-subset (moe::generate_routing's "balanced", the benchmark
// harness's, from the same seeded stream: same seed -> same counts);
// skewed: popularity w_e = 1/(rank_e + 1)^skew over a seeded permutation, top-k sampled without
// replacement (Efraimidis-Spirakis keys from mt19937_64, so results are identical on every platform).
std::vector<int> route_tokens(const MoeLayerConfig& c);

struct MoeScheduleRun {
  std::string schedule;  // "expert-wave" | "interleaved"
  int lead = 0;          // interleaved: D
  int experts_per_wave = 0;
  SimResult sim;
};

struct MoeSimReport {
  MoeLayerConfig config;  // with defaults resolved
  std::string platform;
  int rank = 0;                        // the simulated (most loaded) rank
  std::vector<int> local_tokens;       // tokens per local expert of that rank
  double mean_rank_tokens = 0;         // mean over ranks of routed token-expert pairs
  int rows = 0;                        // b_m-row blocks on that rank
  int l1_ntiles = 0, l2_ntiles = 0;    // N-tiles per row
  double t_l1 = 0, t_l2 = 0;           // mainloop per tile, s
  double l2_bytes = 0;                 // remote bytes of a full L2 tile
  double tiss0_l2 = 0;                 // T_iss^0(K, K * l2_bytes)
  double R = 0, Q = 0;
  int d_knee = 0;
  MoeScheduleRun wave, interleaved;
  double speedup() const { return wave.sim.total_time / interleaved.sim.total_time; }
  nlohmann::json to_json(bool with_tiles = false) const;
};

// Validates the configuration (UsageError naming the bad value), routes, builds and simulates both
// schedules on the platform.
MoeSimReport simulate_moe(const model::Platform& platform, MoeLayerConfig c);

// The tile sequences of every producer (CTA c = instance * roles + role) under a scheduler, for the
// simulator. Exposed for tests.
template <class Sched>
std::vector<std::vector<SimTile>> moe_tiles(const typename Sched::Params& params,
                                            const sched::MoeLayoutStorage& layout, double t_l1, double t_l2,
                                            double epi_time, double l2_bytes_per_token) {
  std::vector<std::vector<SimTile>> out;
  for (int g = 0; g < params.instances; ++g)
    for (int r = 0; r < params.roles; ++r) {
      Sched s(params, g, r);
      std::vector<SimTile> seq;
      for (auto w = s.get_initial_work(); w.is_valid(); w = s.get_next_work(w)) {
        SimTile t;
        t.kind = int(w.tile.kind);
        t.epi_time = epi_time;
        if (w.tile.kind == sched::MoeTileKind::L1) {
          t.mma_time = t_l1;
          t.produces = w.tile.row;
        } else {
          t.mma_time = t_l2;
          t.waits = w.tile.row;
          t.remote_bytes = layout.tokens_in_row(w.tile.row) * l2_bytes_per_token;
        }
        seq.push_back(t);
      }
      out.push_back(std::move(seq));
    }
  return out;
}

}  // namespace xstage::sim
