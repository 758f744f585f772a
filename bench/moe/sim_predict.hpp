#pragma once
// The discrete-event simulator's prediction of both MoE tile orders for one harness configuration
// (host-only wrapper: xstage/sim/moe.hpp is not device-compilable, bench_moe.cu is CUDA).
#include <cstdint>

#include "xstage/moe/order_choice.hpp"

namespace xstage::model {
class Platform;
}

namespace xstage::moe_bench {

struct SimOrders {
  double wave_us = 0, interleaved_us = 0;  // predicted layer time of the most loaded rank
  double speedup = 0;                      // wave / interleaved
};

// The layer of `q` (shape, tokens, world, routing kind, q.sms CTAs) at lead `lead` with `staging` epilogue slots,
// the routing seed `seed` and a tensor rate of `rate_per_sm` FLOP/s per CTA. Throws the simulator's UsageError
// (naming the value) for a configuration it refuses.
SimOrders simulate_orders(const model::Platform& platform, const moe::OrderQuery& q, int lead, int staging,
                          std::uint64_t seed, double rate_per_sm);

}  // namespace xstage::moe_bench
