#pragma once
// The discrete-event simulator's prediction of both MoE tile orders for one harness configuration
// (host-only wrapper: xstage/sim/moe.hpp is not device-compilable, bench_moe.cu is CUDA).
#include <string>

namespace xstage::model {
class Platform;
}

namespace xstage::moe_bench {

struct SimOrders {
  double wave_us = 0, interleaved_us = 0;  // predicted layer time of the most loaded rank
  double speedup = 0;                      // wave / interleaved
};

struct SimQuery {
  int hidden = 0, inter = 0, experts = 0, topk = 0, tokens_per_rank = 0, world = 1, ctas = 0, lead = 1, staging = 1;
  std::string routing = "balanced";
  unsigned long long seed = 1;
  double tc_rate = 0;  // dense FLOP/s of the ctas CTAs together
};

// Throws UsageError (the simulator's, naming the value) for a configuration it refuses.
SimOrders simulate_orders(const model::Platform& platform, const SimQuery& q);

}  // namespace xstage::moe_bench
