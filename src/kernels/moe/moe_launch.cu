// Launches of the fused MoE kernel (both scheduler instantiations) and of the weighted sum
// (moe_params.hpp). The host logic lives in moe_layer.cpp. NOT RUN ON A GPU YET (docs/MOE.md).
#include <array>
#include <algorithm>
#include <atomic>

#include "moe_kernel.cuh"
#include "moe_params.hpp"

namespace xstage::moe_kernel {
namespace {

template <class Sched, bool kInt4, bool kTrace>
cudaError_t launch(const KernelParams<Sched>& kp, int grid, cudaStream_t stream) {
  using C = ConfigT<kInt4>;
  constexpr int kSmemBytes = int(sizeof(SharedStorage<C>));  // 1024-aligned base: checked in the kernel
  auto kernel = moe_fused_kernel<Sched, kInt4, kTrace>;
  // Raising the dynamic shared-memory limit is per function and device; once per device.
  static std::array<std::atomic<bool>, 64> configured{};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev >= 64) return cudaErrorInvalidDevice;
  if (!configured[dev].load()) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        e != cudaSuccess)
      return e;
    configured[dev].store(true);
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.stream = stream;
  // Cooperative always: L2 tiles wait on other CTAs' L1 tiles and receivers on other ranks' dispatch, so
  // every CTA must be resident; a launch that cannot make them so fails instead of deadlocking.
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, kp);
}

}  // namespace

// Instantiations: both orders x {W8A8, W4A8}, and the traced W8A8 kernel of both orders.
template <class Sched>
cudaError_t dispatch_launch(const KernelParams<Sched>& kp, bool int4, bool trace, int grid, cudaStream_t stream) {
  if (trace) return int4 ? cudaErrorNotSupported : launch<Sched, false, true>(kp, grid, stream);
  return int4 ? launch<Sched, true, false>(kp, grid, stream) : launch<Sched, false, false>(kp, grid, stream);
}
cudaError_t launch_fused(const KernelParams<sched::MoeExpertWaveScheduler>& kp, bool int4, bool trace, int grid,
                         cudaStream_t stream) {
  return dispatch_launch(kp, int4, trace, grid, stream);
}
cudaError_t launch_fused(const KernelParams<sched::MoeInterleavedScheduler>& kp, bool int4, bool trace, int grid,
                         cudaStream_t stream) {
  return dispatch_launch(kp, int4, trace, grid, stream);
}
cudaError_t launch_int4_to_e4m3(const uint8_t* in, uint8_t* out, size_t bytes, cudaStream_t stream) {
  const size_t n16 = bytes / 16;
  const int blocks = int(std::min<size_t>((n16 + 255) / 256, 4096));
  int4_to_e4m3_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), n16);
  return cudaGetLastError();
}
cudaError_t launch_combine(const CombineParams& cp, int blocks, int ranks, cudaStream_t stream) {
  combine_kernel<<<dim3(blocks, ranks), 256, 0, stream>>>(cp);
  return cudaGetLastError();
}

}  // namespace xstage::moe_kernel
