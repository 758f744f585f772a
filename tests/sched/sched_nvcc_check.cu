// Compile-only check (CUDA builds): the scheduler headers are valid __host__ __device__ C++17 under
// nvcc, and a kernel templated on the scheduler type instantiates for both schedulers.
#include "xstage/sched/moe_scheduler.hpp"

namespace {
template <class Sched>
__global__ void walk_schedule(typename Sched::Params params, int* n_sum) {
  const Sched sched(params, blockIdx.x, threadIdx.x);
  int sum = 0;
  for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) sum += w.tile.n;
  n_sum[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
}  // namespace

void xstage_sched_nvcc_check_instantiate(int* out) {
  walk_schedule<xstage::sched::MoeInterleavedScheduler><<<1, 1>>>({}, out);
  walk_schedule<xstage::sched::MoeExpertWaveScheduler><<<1, 1>>>({}, out);
}
