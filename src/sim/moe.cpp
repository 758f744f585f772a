// MoE layer -> tile sequences -> X-Stage simulation under both schedulers (include/xstage/sim/moe.hpp).
#include "xstage/sim/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "xstage/common/error.hpp"
#include "xstage/common/rng.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sched/moe_scheduler.hpp"

namespace xstage::sim {

namespace {

// The fields routing depends on.
void validate_routing(const MoeLayerConfig& c) {
  XSTAGE_REQUIRE(c.experts > 0, "expert count must be positive, got ", c.experts);
  XSTAGE_REQUIRE(c.tokens_per_rank > 0, "tokens per rank must be positive, got ", c.tokens_per_rank);
  XSTAGE_REQUIRE(c.topk > 0, "top-k must be positive, got ", c.topk);
  XSTAGE_REQUIRE(c.topk <= c.experts, "top-k (", c.topk, ") exceeds the expert count (", c.experts, ")");
  XSTAGE_REQUIRE(c.routing == "balanced" || c.routing == "uniform" || c.routing == "skewed",
                 "routing must be balanced, uniform or skewed, got '", c.routing, "'");
  XSTAGE_REQUIRE(std::isfinite(c.skew) && c.skew > 0, "skew (Zipf exponent) must be positive, got ", c.skew);
  XSTAGE_REQUIRE(c.world >= 1, "world size P must be >= 1, got ", c.world);
  XSTAGE_REQUIRE(c.experts % c.world == 0, "expert count ", c.experts, " is not divisible by the world size ",
                 c.world);
  // Keep the routed token-expert pairs (and the skewed sampler's work) inside int and a few seconds.
  const long long pairs = 1LL * c.world * c.tokens_per_rank * c.topk;
  XSTAGE_REQUIRE(pairs <= (1LL << 28), "world * tokens per rank * top-k = ", pairs, " is too large to simulate");
  const long long draws = 1LL * c.world * c.tokens_per_rank * c.experts;
  XSTAGE_REQUIRE(c.routing != "skewed" || draws <= (1LL << 28), "skewed routing of world * tokens per rank = ",
                 1LL * c.world * c.tokens_per_rank, " tokens over ", c.experts, " experts is too large to sample");
}

void validate(const MoeLayerConfig& c) {
  validate_routing(c);
  XSTAGE_REQUIRE(c.hidden > 0, "hidden size must be positive, got ", c.hidden);
  XSTAGE_REQUIRE(c.h_inter > 0, "expert intermediate size must be positive, got ", c.h_inter);
  XSTAGE_REQUIRE(c.b_m > 0, "tile b_m must be positive, got ", c.b_m);
  XSTAGE_REQUIRE(c.b_n > 0, "tile b_n must be positive, got ", c.b_n);
  XSTAGE_REQUIRE(c.hidden % c.b_n == 0, "hidden size ", c.hidden, " is not a multiple of b_n = ", c.b_n);
  XSTAGE_REQUIRE((2LL * c.h_inter) % c.b_n == 0, "2 * h_inter = ", 2LL * c.h_inter,
                 " is not a multiple of b_n = ", c.b_n);
  XSTAGE_REQUIRE(c.l1_cols >= 0 && c.l2_cols >= 0, "L1 / L2 tile columns must be positive (0: b_n), got ",
                 c.l1_cols, " / ", c.l2_cols);
  const int l1 = c.l1_cols > 0 ? c.l1_cols : c.b_n, l2 = c.l2_cols > 0 ? c.l2_cols : c.b_n;
  // (the last L2 tile may be ragged, as the kernel's 256-column tiles are where 256 does not divide hidden)
  XSTAGE_REQUIRE(l2 % c.b_n == 0, "L2 tile width ", l2, " is not a multiple of b_n = ", c.b_n);
  XSTAGE_REQUIRE((2LL * c.h_inter) % l1 == 0, "2 * h_inter = ", 2LL * c.h_inter,
                 " is not a multiple of the L1 tile width ", l1);
  XSTAGE_REQUIRE(c.dtype_bytes == 1 || c.dtype_bytes == 2, "dtype bytes must be 1 (fp8) or 2 (bf16), got ",
                 c.dtype_bytes);
  // An element: 1 (fp8), 2 (bf16/fp16), 4 (fp32) or 8 bytes; larger values only make the simulator crawl.
  XSTAGE_REQUIRE(c.out_bytes >= 1 && c.out_bytes <= 8, "output bytes per element must be in [1, 8], got ", c.out_bytes);
  XSTAGE_REQUIRE(std::isfinite(c.tc_rate) && c.tc_rate >= 0, "tensor-core rate must be positive, got ",
                 c.tc_rate);
  XSTAGE_REQUIRE(c.roles == 1 || c.roles == 2, "roles per instance must be 1 or 2, got ", c.roles);
  XSTAGE_REQUIRE(c.sms > 0, "SM count must be positive, got ", c.sms);
  XSTAGE_REQUIRE(c.sms % c.roles == 0, "SM count ", c.sms, " is not a multiple of the roles per instance ",
                 c.roles);
  const long long l1_tiles = 2LL * c.h_inter / l1, l2_tiles = (c.hidden + l2 - 1LL) / l2;
  // A row's tiles times the rows must index as int on the device (MoeLayoutStorage); name the sizes here, before a
  // layout could only say "too many tiles".
  XSTAGE_REQUIRE(l1_tiles + l2_tiles < (1LL << 22), "hidden size ", c.hidden, " and intermediate size ", c.h_inter,
                 " give ", l1_tiles + l2_tiles, " N-tiles per row (", l1_tiles, " L1 + ", l2_tiles,
                 " L2); at most 4194303 are simulated");
  XSTAGE_REQUIRE(l2_tiles % c.roles == 0 && l1_tiles % c.roles == 0, "N-tiles per row (", l1_tiles, " for L1, ",
                 l2_tiles, " for L2) must be multiples of the roles per instance ", c.roles);
  XSTAGE_REQUIRE(c.lead >= 1 || c.lead == -1, "lead D must be >= 1, got ", c.lead,
                 " (D = 0 lets an instance emit L2 of a row before its own L1 tiles of that row: an in-order "
                 "kernel deadlocks; see docs/SCHEDULERS.md)");
  XSTAGE_REQUIRE(c.experts_per_wave >= 0, "experts per wave must be positive, got ", c.experts_per_wave);
  XSTAGE_REQUIRE(c.wave_lag == 0 || c.wave_lag == 1, "wave lag must be 0 or 1, got ", c.wave_lag);
  XSTAGE_REQUIRE(c.staging >= 1, "staging depth must be >= 1, got ", c.staging);
  XSTAGE_REQUIRE(std::isfinite(c.epi_time) && c.epi_time >= 0, "epilogue staging time must be >= 0, got ",
                 c.epi_time);
  XSTAGE_REQUIRE(std::isfinite(c.t_l1) && c.t_l1 >= 0 && c.t_l1 < 1, "L1 tile time must be in [0, 1) s (0: from "
                 "the tensor-core rate), got ", c.t_l1);
  XSTAGE_REQUIRE(std::isfinite(c.t_l2) && c.t_l2 >= 0 && c.t_l2 < 1, "L2 tile time must be in [0, 1) s (0: from "
                 "the tensor-core rate), got ", c.t_l2);
}


}  // namespace

std::vector<int> route_tokens(const MoeLayerConfig& c) {
  validate_routing(c);
  const long long tokens = 1LL * c.world * c.tokens_per_rank;
  std::vector<int> count(c.experts, 0);
  if (c.routing == "balanced") {
    for (long long t = 0; t < tokens; ++t)
      for (int j = 0; j < c.topk; ++j) count[(t * c.topk + j) % c.experts]++;
    return count;
  }
  std::mt19937_64 gen(c.seed);
  if (c.routing == "uniform") {
    // Every token's experts a uniform k-subset: moe::generate_routing's balanced routing (the harness's), the same
    // stream, so a seed gives the per-expert counts (and rows) of the run it came from.
    rng::UniformSubsets subsets(c.experts);
    for (long long t = 0; t < tokens; ++t) subsets.draw(gen, c.topk, [&](int, int e) { count[e]++; });
    return count;
  }
  rng::ZipfSubsets zipf(gen, c.experts, c.skew);
  for (long long t = 0; t < tokens; ++t) zipf.draw(gen, c.topk, false, [&](int, int e) { count[e]++; });
  return count;
}

MoeSimReport simulate_moe(const model::Platform& platform, MoeLayerConfig c) {
  if (c.sms == 0) c.sms = platform.sm_count;
  if (c.tc_rate == 0) {
    c.tc_rate = c.dtype_bytes == 1 ? platform.tc_fp8 : platform.tc_bf16;
    XSTAGE_REQUIRE(c.tc_rate > 0, "platform '", platform.name, "' records no ",
                   c.dtype_bytes == 1 ? "fp8" : "bf16", " tensor-core rate: give one explicitly");
  }
  validate(c);
  if (c.l1_cols == 0) c.l1_cols = c.b_n;
  if (c.l2_cols == 0) c.l2_cols = c.b_n;
  MoeSimReport rep;
  rep.platform = platform.name;
  rep.l1_ntiles = 2 * c.h_inter / c.l1_cols;
  rep.l2_ntiles = (c.hidden + c.l2_cols - 1) / c.l2_cols;  // the last one ragged where l2_cols does not divide hidden
  rep.d_knee = int(std::max<long long>(1, model::bg::d_knee(c.l1_cols, c.sms, c.h_inter)));
  if (c.lead == -1) c.lead = rep.d_knee;

  const std::vector<int> routed = route_tokens(c);
  const int local = c.experts / c.world;
  long long best = -1;
  for (int r = 0; r < c.world; ++r) {
    const long long load = std::accumulate(routed.begin() + r * local, routed.begin() + (r + 1) * local, 0LL);
    if (load > best) best = load, rep.rank = r;  // the most loaded rank (lowest index on ties)
  }
  rep.local_tokens.assign(routed.begin() + rep.rank * local, routed.begin() + (rep.rank + 1) * local);
  rep.mean_rank_tokens = double(c.tokens_per_rank) * c.topk;  // P*T*k pairs over P ranks
  sched::MoeLayoutStorage layout(rep.local_tokens, c.b_m, rep.l1_ntiles, rep.l2_ntiles);
  rep.rows = layout.rows();
  if (c.memory_limit > 0) {
    const long long tiles = (long long)rep.rows * (rep.l1_ntiles + rep.l2_ntiles);
    const double need = moe_sim_bytes(tiles, c.json_tiles);
    XSTAGE_REQUIRE(need <= c.memory_limit, "--tokens ", c.tokens_per_rank, ": the simulation would need about ",
                   std::ceil(need / 1e8) / 10, " GB (", tiles, " tiles per schedule",
                   c.json_tiles ? ", every one printed as JSON" : "", "), more than the ",
                   std::floor(c.memory_limit / 1e8) / 10, " GB allowed (half of this machine's memory, at most 4 GB); "
                   "simulate fewer tokens");
  }

  // Mainloops from the per-SM share of the GPU's dense rate (measured with every SM busy), or as measured.
  const double per_sm = c.tc_rate / platform.sm_count;
  rep.t_l1 = c.t_l1 > 0 ? c.t_l1 : 2.0 * c.b_m * c.l1_cols * c.hidden / per_sm;
  rep.t_l2 = c.t_l2 > 0 ? c.t_l2 : 2.0 * c.b_m * c.l2_cols * c.h_inter / per_sm;
  const double remote_fraction = double(c.world - 1) / c.world;
  const double bytes_per_token = double(c.l2_cols) * c.out_bytes * remote_fraction;
  rep.l2_bytes = bytes_per_token * c.b_m;

  SimConfig sc = SimConfig::from_platform(platform, c.sms, c.staging);
  sc.kind_names = {"L1", "L2"};
  rep.R = sc.R;
  rep.Q = sc.Q;
  rep.tiss0_l2 = rep.l2_bytes > 0 ? sc.tiss0(rep.l2_bytes) : 0;

  const int instances = c.sms / c.roles;
  if (c.experts_per_wave == 0) {
    // Like MegaMoE's wave heuristic: the fewest experts whose average L1 tile pairs give every
    // instance at least one, so a wave's L1 work fills the machine before its L2 tiles start.
    const double rows_per_expert = std::max(1.0, double(rep.rows) / local);
    const double pairs_per_expert = rows_per_expert * (rep.l1_ntiles / c.roles);
    c.experts_per_wave = std::clamp(int(std::ceil(instances / pairs_per_expert)), 1, local);
  }
  rep.config = c;

  sched::MoeExpertWaveScheduler::Params wp{layout.view(), instances, c.roles, c.experts_per_wave, 0, c.wave_lag};
  sched::MoeExpertWaveScheduler::validate(wp);
  rep.wave.schedule = "expert-wave";
  rep.wave.experts_per_wave = c.experts_per_wave;
  rep.wave.sim = simulate(sc, moe_tiles<sched::MoeExpertWaveScheduler>(wp, layout, rep.t_l1, rep.t_l2,
                                                                        c.epi_time, bytes_per_token));

  sched::MoeInterleavedScheduler::Params ip{layout.view(), instances, c.roles, c.lead};
  sched::MoeInterleavedScheduler::validate(ip);
  rep.interleaved.schedule = "interleaved";
  rep.interleaved.lead = c.lead;
  rep.interleaved.sim = simulate(sc, moe_tiles<sched::MoeInterleavedScheduler>(ip, layout, rep.t_l1, rep.t_l2,
                                                                                c.epi_time, bytes_per_token));
  return rep;
}

double moe_sim_bytes(long long tiles_per_schedule, bool json_tiles) {
  // ~125 B per tile measured (7.4 GB for 10M tokens, 6e7 tiles); 2.1 KB more per tile for --json --tiles
  // (12 GB for 1M tokens); both rounded up.
  const double per_tile = 160 + (json_tiles ? 2500 : 0);
  return 2.0 * double(tiles_per_schedule) * per_tile + 64e6;
}

nlohmann::json MoeSimReport::to_json(bool with_tiles) const {
  constexpr double us = 1e6;
  const MoeLayerConfig& c = config;
  nlohmann::json j;
  j["platform"] = platform;
  j["config"] = {{"hidden", c.hidden},         {"h_inter", c.h_inter},
                 {"experts", c.experts},       {"tokens_per_rank", c.tokens_per_rank},
                 {"topk", c.topk},             {"routing", c.routing},
                 {"skew", c.skew},             {"seed", c.seed},
                 {"b_m", c.b_m},               {"b_n", c.b_n},
                 {"l1_cols", c.l1_cols},       {"l2_cols", c.l2_cols},       {"wave_lag", c.wave_lag},
                 {"dtype_bytes", c.dtype_bytes}, {"out_bytes", c.out_bytes},
                 {"tc_tflops", c.tc_rate / 1e12}, {"world", c.world},
                 {"sms", c.sms},               {"roles", c.roles},
                 {"lead", c.lead},             {"experts_per_wave", c.experts_per_wave},
                 {"staging", c.staging},       {"epi_us", c.epi_time * us},
                 {"t_l1_us", c.t_l1 * us},     {"t_l2_us", c.t_l2 * us}};
  j["rank"] = rank;
  j["local_tokens"] = local_tokens;
  j["rank_tokens"] = std::accumulate(local_tokens.begin(), local_tokens.end(), 0LL);
  j["mean_rank_tokens"] = mean_rank_tokens;
  j["rows"] = rows;
  j["l1_ntiles"] = l1_ntiles;
  j["l2_ntiles"] = l2_ntiles;
  j["t_l1_mma_us"] = t_l1 * us;
  j["t_l2_mma_us"] = t_l2 * us;
  j["l2_tile_remote_bytes"] = l2_bytes;
  j["tiss0_l2_us"] = tiss0_l2 * us;
  j["R_GBps"] = R / 1e9;
  j["Q_bytes"] = Q;
  j["d_knee"] = d_knee;
  for (const MoeScheduleRun* run : {&wave, &interleaved}) {
    nlohmann::json s = run->sim.to_json(with_tiles);
    s["schedule"] = run->schedule;
    if (run->schedule == "interleaved") s["lead"] = run->lead;
    else s["experts_per_wave"] = run->experts_per_wave;
    j["schedules"].push_back(s);
  }
  j["speedup_wave_over_interleaved"] = speedup();
  return j;
}

}  // namespace xstage::sim
