// Compile-only check (CUDA builds): every device building block, PTX wrapper, scheduler and layout
// header is includable together with every other one in one translation unit (no duplicate definitions).
#include "xstage/kernel/barrier.cuh"
#include "xstage/kernel/fragment.cuh"
#include "xstage/kernel/pipeline.cuh"
#include "xstage/kernel/signal.cuh"
#include "xstage/layout/ulysses.hpp"
#include "xstage/ptx/store.cuh"
#include "xstage/ptx/sync.cuh"
#include "xstage/ptx/timer.cuh"
#include "xstage/ptx/tma.cuh"
#include "xstage/ptx/wgmma.cuh"
#include "xstage/runtime/device.cuh"
#include "xstage/runtime/device_error.hpp"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"
#include "xstage/sched/attention_scheduler.cuh"
#include "xstage/sched/moe_layout.hpp"
#include "xstage/sched/moe_scheduler.hpp"
#include "xstage/sched/work_tile.hpp"

namespace {
// One kernel templated on each scheduler type: the one interface instantiates for all three.
template <class Sched>
__global__ void walk(typename Sched::Params params, int* out) {
  const Sched sched(params, blockIdx.x);
  int n = 0;
  for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) ++n;
  out[blockIdx.x] = n;
}
}  // namespace

void xstage_headers_together_instantiate(int* out) {
  walk<xstage::sched::StaticPersistentAttnScheduler><<<1, 1>>>({}, out);
  walk<xstage::sched::MoeInterleavedScheduler><<<1, 1>>>({}, out);
  walk<xstage::sched::MoeExpertWaveScheduler><<<1, 1>>>({}, out);
}
