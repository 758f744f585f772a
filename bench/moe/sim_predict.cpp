#include "sim_predict.hpp"

#include "xstage/sim/moe.hpp"

namespace xstage::moe_bench {

SimOrders simulate_orders(const model::Platform& platform, const SimQuery& q) {
  sim::MoeLayerConfig sc;
  sc.hidden = q.hidden;
  sc.h_inter = q.inter;
  sc.experts = q.experts;
  sc.tokens_per_rank = q.tokens_per_rank;
  sc.topk = q.topk;
  sc.routing = q.routing;
  sc.seed = q.seed;
  sc.world = q.world;
  sc.sms = q.ctas;
  sc.tc_rate = q.tc_rate;
  sc.lead = q.lead;
  sc.staging = q.staging;
  sc.memory_limit = 8e9;  // the largest grid point needs far less (docs/SIMULATOR.md)
  const sim::MoeSimReport r = sim::simulate_moe(platform, sc);
  return {r.wave.sim.total_time * 1e6, r.interleaved.sim.total_time * 1e6, r.speedup()};
}

}  // namespace xstage::moe_bench
