// Compile-only check (CUDA builds): include/xstage/bench/protocol_cuda.cuh under nvcc, with a kernel as
// the timed call, in both timers (events and graph replay).
#include "xstage/bench/protocol_cuda.cuh"

namespace {
__global__ void touch(float* x, int n, int call) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += static_cast<float>(call);
}
}  // namespace

xstage::bench::Result xstage_bench_protocol_cuda_check(float* x, int n, cudaStream_t stream, bool use_graph) {
  namespace xb = xstage::bench;
  auto fn = [=](int call) { touch<<<(n + 255) / 256, 256, 0, stream>>>(x, n, call); };
  const xb::CallTiming one = xb::time_block(fn, stream, 0.01);
  (void)one;
  xb::Params p;
  p.warmup_s = 0.01;
  p.block_s = 0.02;
  p.rounds = 1;
  return xb::run_protocol_cuda({"a", "b"}, {fn, fn}, stream, p, use_graph);
}
