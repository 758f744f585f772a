#include "xstage/moe/order_sim.hpp"

#include "xstage/sim/moe.hpp"

namespace xstage::moe {

SimOrders simulate_orders(const model::Platform& platform, const OrderQuery& q, int lead, int staging,
                          std::uint64_t seed, double rate_per_sm) {
  sim::MoeLayerConfig sc;
  sc.hidden = int(q.hidden);
  sc.h_inter = int(q.inter);
  sc.experts = q.experts;
  sc.tokens_per_rank = int(q.tokens);
  sc.topk = q.topk;
  sc.routing = q.routing == RoutingKind::Skewed ? "skewed" : "balanced";
  sc.seed = seed;
  sc.world = q.world;
  sc.sms = q.sms;
  sc.b_m = q.b_m;
  sc.b_n = q.b_n;
  sc.l1_cols = q.l1_cols;  // the kernel's tile widths (0: b_n)
  sc.l2_cols = q.l2_cols;
  // simulate_moe takes the GPU's rate and divides it by the platform's SM count: a tile runs at one SM's rate
  // however many CTAs (q.sms) the kernel launches.
  sc.tc_rate = rate_per_sm * platform.sm_count;
  sc.lead = lead;
  sc.staging = staging;
  sc.memory_limit = 8e9;  // the largest harness configuration needs far less (docs/SIMULATOR.md)
  const sim::MoeSimReport r = sim::simulate_moe(platform, sc);
  SimOrders so{r.wave.sim.total_time * 1e6, r.interleaved.sim.total_time * 1e6, r.speedup()};
  if (q.world == 1) {  // lagged waves are a P = 1 choice (choose_moe_order): not simulated at P > 1, where a run is long
    sc.wave_lag = 1;   // (simulate_moe runs both orders again; only Expert-Wave's time differs)
    so.wave_lag_us = sim::simulate_moe(platform, sc).wave.sim.total_time * 1e6;
    sc.wave_lag = 0;
    sc.lead = kLeadAllRows;
    so.interleaved_all_us = sim::simulate_moe(platform, sc).interleaved.sim.total_time * 1e6;
  }
  return so;
}

OrderQuery with_simulated_orders(const model::Platform& platform, OrderQuery q, int staging, std::uint64_t seed,
                                 double rate_per_sm) {
  const SimOrders so = simulate_orders(platform, q, choose_moe_order(platform, q).lead, staging, seed, rate_per_sm);
  q.sim_wave_s = so.wave_us * 1e-6;
  q.sim_interleaved_s = so.interleaved_us * 1e-6;
  q.sim_wave_lag_s = so.wave_lag_us * 1e-6;
  q.sim_interleaved_all_s = so.interleaved_all_us * 1e-6;
  return q;
}

}  // namespace xstage::moe
