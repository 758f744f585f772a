// CUDA timing for the benchmark protocol (docs/BENCHMARKING.md): back-to-back calls between two CUDA
// events on a stream, or CUDA-graph replay, and run_protocol_cuda() = the protocol driver of
// protocol.hpp with this timer and the NVML sampler of nvml.hpp. Host code; compile with nvcc (or a host
// compiler with the CUDA runtime headers) and link CUDA::cudart, ${CMAKE_DL_LIBS}, Threads::Threads.
//
// A backend is a std::function<void(int call)> that enqueues one call on the given stream; `call` counts
// that backend's calls over its warm-ups and blocks, so fn(call) rotates its inputs as inputs[call % n].
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "xstage/bench/nvml.hpp"
#include "xstage/bench/protocol.hpp"

namespace xstage::bench {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The PCI bus id of a CUDA device ordinal, for NvmlReader / NvmlSampler: NVML numbers the host's GPUs, CUDA the
// visible ones, so an ordinal is not an NVML index under CUDA_VISIBLE_DEVICES. Empty when CUDA cannot say.
inline std::string cuda_pci_bus_id(int cuda_device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, cuda_device) != cudaSuccess) {
    (void)cudaGetLastError();  // not the caller's next launch check's error
    return {};
  }
  return id;
}

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An event pair on one stream; seconds() synchronises on the second event.
class EventPair {
 public:
  EventPair() {
    cuda_check(cudaEventCreate(&e0_), "cudaEventCreate");
    cuda_check(cudaEventCreate(&e1_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start(cudaStream_t s) { cuda_check(cudaEventRecord(e0_, s), "cudaEventRecord"); }
  void stop(cudaStream_t s) { cuda_check(cudaEventRecord(e1_, s), "cudaEventRecord"); }
  double seconds() {
    cuda_check(cudaEventSynchronize(e1_), "cudaEventSynchronize");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, e0_, e1_), "cudaEventElapsedTime");
    return ms / 1e3;
  }

 private:
  cudaEvent_t e0_{}, e1_{};
};

// n back-to-back calls fn(first), ..., fn(first + n - 1) on `stream` between two events.
inline CallTiming time_calls(const std::function<void(int call)>& fn, cudaStream_t stream, long first, long n) {
  EventPair ev;
  ev.start(stream);
  const double h0 = wall_seconds();
  for (long c = first; c < first + n; ++c) fn(static_cast<int>(c));
  const double host = wall_seconds() - h0;
  ev.stop(stream);
  return {ev.seconds(), n, host};
}

// One steady-state block: `seconds` of back-to-back calls between two CUDA events; time per call =
// block time / calls. The call count is calls_for_block(seconds, per_call_s) with per_call_s from the
// backend's warm-up (warm_up() in protocol.hpp); per_call_s <= 0: one timed probe call sizes it.
inline CallTiming time_block(std::function<void(int call)> fn, cudaStream_t stream, double seconds,
                             double per_call_s = 0, long first = 0, long min_calls = kDefaultMinCalls) {
  if (!(per_call_s > 0)) {
    const CallTiming probe = time_calls(fn, stream, first, 1);
    per_call_s = probe.seconds;
    first += 1;
  }
  return time_calls(fn, stream, first, calls_for_block(seconds, per_call_s, min_calls));
}

// `calls` calls fn(0..calls-1) captured once into a CUDA graph (the stream must not be the legacy
// default stream); replay(n) launches the graph n times.
class CallGraph {
 public:
  CallGraph(const std::function<void(int call)>& fn, cudaStream_t stream, int calls) : calls_(calls) {
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    for (int c = 0; c < calls; ++c) fn(c);
    cudaGraph_t graph{};
    cuda_check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    cuda_check(e, "cudaGraphInstantiate");
  }
  ~CallGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  CallGraph(const CallGraph&) = delete;
  CallGraph& operator=(const CallGraph&) = delete;
  int calls() const { return calls_; }
  void replay(cudaStream_t stream, long n) const {
    for (long i = 0; i < n; ++i) cuda_check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
  }

 private:
  cudaGraphExec_t exec_{};
  int calls_;
};

// The protocol's Timer on CUDA: one function per backend, events or graph replay (a graph of
// calls_per_graph calls per backend, captured on first use; n calls become ceil(n / G) replays).
class CudaTimer final : public Timer {
 public:
  CudaTimer(std::vector<std::function<void(int call)>> fns, cudaStream_t stream, bool use_graph = false,
            int calls_per_graph = 16)
      : fns_(std::move(fns)), stream_(stream), use_graph_(use_graph), calls_per_graph_(calls_per_graph),
        graphs_(fns_.size()) {}
  const char* name() const override { return use_graph_ ? "graph" : "events"; }
  double now() override { return wall_seconds(); }
  CallTiming time_calls(int backend, long first, long n) override {
    if (!use_graph_) return xstage::bench::time_calls(fns_.at(backend), stream_, first, n);
    auto& g = graphs_.at(backend);
    if (!g) g = std::make_unique<CallGraph>(fns_[backend], stream_, calls_per_graph_);
    const long replays = std::max(1L, (n + g->calls() - 1) / g->calls());
    EventPair ev;
    ev.start(stream_);
    const double h0 = wall_seconds();
    g->replay(stream_, replays);
    const double host = wall_seconds() - h0;
    ev.stop(stream_);
    return {ev.seconds(), replays * g->calls(), host};
  }

 private:
  std::vector<std::function<void(int call)>> fns_;
  cudaStream_t stream_;
  bool use_graph_;
  int calls_per_graph_;
  std::vector<std::unique_ptr<CallGraph>> graphs_;
};

// The whole protocol on CUDA with NVML sampling (null fields without NVML). For graph replay the graph
// holds n_inputs * ceil(16 / n_inputs) calls, so the input rotation repeats inside it.
inline Result run_protocol_cuda(const std::vector<std::string>& names, std::vector<std::function<void(int call)>> fns,
                                cudaStream_t stream, const Params& p, bool use_graph = false,
                                const std::function<void(const Block&)>& log = {}) {
  if (fns.size() != names.size()) throw std::invalid_argument("run_protocol_cuda: one function per backend");
  const int k = std::max(1, p.n_inputs);
  CudaTimer timer(std::move(fns), stream, use_graph, k * ((16 + k - 1) / k));
  NvmlSampler sampler(cuda_pci_bus_id(p.nvml_device), p.sample_period_s);
  return run_protocol(names, timer, &sampler, p, log);
}

}  // namespace xstage::bench
