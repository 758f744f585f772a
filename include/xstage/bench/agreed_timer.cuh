#pragma once
// The benchmark protocol's Timer for real ranks (one process per GPU): every call of a fused
// distributed kernel waits on the peers' calls, so every rank must make the same number of calls per
// block. The block length each rank's protocol asks for is replaced by the maximum over the ranks (a
// host allreduce before the block), and the time-based warm-up stops only when every rank's time is up
// (all_done: a host allreduce of the ranks' stop flags). Without a communicator (one process: P = 1 or
// emulated ranks) it is the plain CudaTimer.
#include <functional>
#include <vector>

#include "xstage/bench/protocol_cuda.cuh"
#include "xstage/runtime/comm.hpp"

namespace xstage::bench {

class AgreedTimer final : public Timer {
 public:
  AgreedTimer(std::vector<std::function<void(int)>> fns, cudaStream_t s, runtime::Communicator* comm)
      : inner_(std::move(fns), s), comm_(comm) {}
  const char* name() const override { return "events"; }
  double now() override { return wall_seconds(); }
  CallTiming time_calls(int backend, long first, long n) override {
    if (comm_) n = long(comm_->allreduce((long long)n, ncclMax));
    return inner_.time_calls(backend, first, n);
  }
  bool all_done(bool done) override { return comm_ ? comm_->allreduce(done ? 1LL : 0LL, ncclMin) == 1 : done; }

 private:
  CudaTimer inner_;
  runtime::Communicator* comm_;
};

}  // namespace xstage::bench
