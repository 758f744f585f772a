#pragma once
// The discrete-event simulator's prediction of both fused-MoE tile orders for one order query (host only:
// xstage/sim/moe.hpp behind a plain declaration, so CUDA translation units can call it). `auto` at P = 1
// takes these times (OrderQuery::sim_wave_s / sim_interleaved_s, order_choice.hpp); the MoE harness also
// records them beside every measurement.
#include <cstdint>

#include "xstage/moe/order_choice.hpp"

namespace xstage::model {
class Platform;
}

namespace xstage::moe {

struct SimOrders {
  double wave_us = 0, interleaved_us = 0;  // predicted layer time of the most loaded rank
  double speedup = 0;                      // wave / interleaved
  double wave_lag_us = 0;  // Expert-Wave with lagged waves (sched::MoeExpertWaveScheduler wave_lag); P = 1 only, else 0
  // Interleaved with every Linear-1 tile first (lead kLeadAllRows); P = 1 only, else 0
  double interleaved_all_us = 0;
};

// The layer of `q` (shape, tokens, world, routing kind, q.sms CTAs) at lead `lead` with `staging` epilogue
// slots, the routing seed `seed` (skewed routing: generate_routing's stream) and a tensor rate of
// `rate_per_sm` FLOP/s per CTA. Throws the simulator's UsageError (naming the value) for a configuration it
// refuses.
SimOrders simulate_orders(const model::Platform& platform, const OrderQuery& q, int lead, int staging,
                          std::uint64_t seed, double rate_per_sm);

// `q` with sim_wave_s / sim_interleaved_s / sim_wave_lag_s filled in: simulate_orders at the lead choose_moe_order(q) runs
// (q.lead, else D_knee of q's L1 tile width) -- what `auto` takes at P = 1.
OrderQuery with_simulated_orders(const model::Platform& platform, OrderQuery q, int staging, std::uint64_t seed,
                                 double rate_per_sm);

}  // namespace xstage::moe
