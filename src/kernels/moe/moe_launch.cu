// Launches of the fused MoE kernel (both scheduler instantiations) and of the weighted sum
// (moe_params.hpp). The host logic lives in moe_layer.cpp. docs/MOE.md says what has run on a GPU.
#include <array>
#include <algorithm>
#include <atomic>

#include "moe_kernel.cuh"
#include "moe_params.hpp"
#include "xstage/moe/quant.hpp"

namespace xstage::moe_kernel {
namespace {

template <class Sched, MoeWeightFormat kFormat, bool kTrace, bool kLean = false>
cudaError_t configure() {
  using C = ConfigT<kFormat>;
  constexpr int kSmemBytes = int(sizeof(SharedStorage<C>));  // 1024-aligned base: checked in the kernel
  // Raising the dynamic shared-memory limit is per function and device; once per device.
  static std::array<std::atomic<bool>, 64> configured{};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev >= 64) return cudaErrorInvalidDevice;
  if (!configured[dev].load()) {
    if (cudaError_t e = cudaFuncSetAttribute(moe_fused_kernel<Sched, kFormat, kTrace, kLean>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        e != cudaSuccess)
      return e;
    configured[dev].store(true);
  }
  return cudaSuccess;
}

template <class Sched, MoeWeightFormat kFormat, bool kTrace, bool kLean = false>
cudaLaunchConfig_t config(int grid, cudaStream_t stream) {
  using C = ConfigT<kFormat>;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = int(sizeof(SharedStorage<C>));
  cfg.stream = stream;
  return cfg;
}

// Resident pairs of this instantiation, asked of the driver once per device (the host's launch-shape check and
// the launch itself both need it on every call).
template <class Sched, MoeWeightFormat kFormat, bool kTrace, bool kLean = false>
cudaError_t resident_pairs(int* pairs) {
  static std::array<std::atomic<int>, 64> cached{};  // 0: not asked yet
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev >= 64) return cudaErrorInvalidDevice;
  if (const int n = cached[dev].load(); n > 0) {
    *pairs = n;
    return cudaSuccess;
  }
  if (cudaError_t e = configure<Sched, kFormat, kTrace, kLean>(); e != cudaSuccess) return e;
  cudaLaunchConfig_t cfg = config<Sched, kFormat, kTrace, kLean>(2, nullptr);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaOccupancyMaxActiveClusters(pairs, moe_fused_kernel<Sched, kFormat, kTrace, kLean>, &cfg);
  if (e == cudaSuccess && *pairs > 0) cached[dev].store(*pairs);
  return e;
}

template <class Sched, MoeWeightFormat kFormat, bool kTrace, bool kLean = false>
cudaError_t launch(const KernelParams<Sched>& kp, int grid, cudaStream_t stream) {
  if (cudaError_t e = configure<Sched, kFormat, kTrace, kLean>(); e != cudaSuccess) return e;
  cudaLaunchConfig_t cfg = config<Sched, kFormat, kTrace, kLean>(grid, stream);
  cudaLaunchAttribute attr[1];
  if (kp.cluster > 1) {
    // CTA pairs: a cluster launch. Every CTA must still be resident (L2 tiles wait on other CTAs' L1 tiles,
    // receivers on other ranks' dispatch): the host sized the grid by cudaOccupancyMaxActiveClusters, and this
    // re-check makes a launch that could not be resident fail instead of deadlocking.
    int pairs = 0;
    if (cudaError_t e = resident_pairs<Sched, kFormat, kTrace, kLean>(&pairs); e != cudaSuccess) return e;
    if (grid % 2 != 0 || grid / 2 > pairs) return cudaErrorCooperativeLaunchTooLarge;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
  } else {
    // Cooperative: every CTA resident, or the launch fails instead of deadlocking.
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
  }
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, moe_fused_kernel<Sched, kFormat, kTrace, kLean>, kp);
}

template <class Sched>
cudaError_t dispatch_pairs(MoeWeightFormat format, bool trace, int* pairs) {
  using F = MoeWeightFormat;
  if (trace) return format == F::kFp8 ? resident_pairs<Sched, F::kFp8, true>(pairs) : cudaErrorNotSupported;
  switch (format) {
    case F::kFp8: return resident_pairs<Sched, F::kFp8, false>(pairs);
    case F::kInt4: return resident_pairs<Sched, F::kInt4, false>(pairs);
    case F::kBf16: return resident_pairs<Sched, F::kBf16, false>(pairs);
  }
  return cudaErrorNotSupported;
}

}  // namespace

// Instantiations: both orders x {W8A8, W4A8, bf16}, the traced W8A8 kernel and the lean W8A8 and W4A8 kernels of
// both orders (12 in all). The lean kernel's residency is the full one's (same threads, registers and shared
// memory; launch re-checks).
template <class Sched>
cudaError_t dispatch_launch(const KernelParams<Sched>& kp, MoeWeightFormat format, bool trace, int grid,
                            cudaStream_t stream) {
  using F = MoeWeightFormat;
  if (trace) return format == F::kFp8 ? launch<Sched, F::kFp8, true>(kp, grid, stream) : cudaErrorNotSupported;
  switch (format) {
    case F::kFp8:
      return kp.lean ? launch<Sched, F::kFp8, false, true>(kp, grid, stream)
                     : launch<Sched, F::kFp8, false>(kp, grid, stream);
    case F::kInt4:
      return kp.lean ? launch<Sched, F::kInt4, false, true>(kp, grid, stream)
                     : launch<Sched, F::kInt4, false>(kp, grid, stream);
    case F::kBf16: return launch<Sched, F::kBf16, false>(kp, grid, stream);
  }
  return cudaErrorNotSupported;
}
cudaError_t launch_fused(const KernelParams<sched::MoeExpertWaveScheduler>& kp, MoeWeightFormat format, bool trace,
                         int grid, cudaStream_t stream) {
  return dispatch_launch(kp, format, trace, grid, stream);
}
cudaError_t launch_fused(const KernelParams<sched::MoeInterleavedScheduler>& kp, MoeWeightFormat format, bool trace,
                         int grid, cudaStream_t stream) {
  return dispatch_launch(kp, format, trace, grid, stream);
}
cudaError_t max_resident_pairs(MoeOrder order, MoeWeightFormat format, bool trace, int* pairs) {
  return order == MoeOrder::kExpertWave ? dispatch_pairs<sched::MoeExpertWaveScheduler>(format, trace, pairs)
                                        : dispatch_pairs<sched::MoeInterleavedScheduler>(format, trace, pairs);
}
namespace {
// pack_int4_weights' two passes (moe_layer.cpp): the lowest element index holding a -8, then the packing.
__global__ void __launch_bounds__(256) int4_find_minus8_kernel(const uint32_t* __restrict__ in, size_t words,
                                                              unsigned long long* first) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t w = in[i];
    const uint32_t eight = w & ~(w << 1) & ~(w << 2) & ~(w << 3) & 0x88888888u;  // nibbles 1000b: bit 3 alone
    if (eight) atomicMin(first, 8ull * i + uint64_t(__ffs(int(eight)) - 1) / 4);
  }
}
// One thread per word of the fragment layout: its eight values gathered from the [rows][K] two's complement matrix
// (moe::int4_frag_element, the inverse of int4_frag_slot) and packed (moe::int4_sm_bits). No -8 is left: the first
// pass found none.
__global__ void __launch_bounds__(256) int4_pack_frag_kernel(const uint8_t* __restrict__ in, uint32_t* __restrict__ out,
                                                             size_t words, int rows, int K) {
  const size_t per_matrix = size_t(rows) * K / 8;
  const int row_blocks = rows / 64;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    const size_t m = i / per_matrix, wi = i % per_matrix, blk = wi / 1024;
    const int word = int(wi % 1024), r0 = int(blk % row_blocks) * 64, k0 = int(blk / row_blocks) * 128;
    const uint8_t* mat = in + m * per_matrix * 4;
    uint32_t p = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int r, k;
      moe::int4_frag_element(word, j, r, k);
      const size_t e = size_t(r0 + r) * K + size_t(k0 + k);
      const int nib = (mat[e / 2] >> (4 * (e % 2))) & 0xF;
      p |= moe::int4_sm_bits(j, nib >= 8 ? nib - 16 : nib);
    }
    out[i] = p;
  }
}
int grid_for_words(size_t words) { return int(std::max<size_t>(1, std::min<size_t>((words + 255) / 256, 4096))); }
}  // namespace
cudaError_t launch_int4_find_minus8(const uint8_t* in, size_t bytes, unsigned long long* first, cudaStream_t stream) {
  int4_find_minus8_kernel<<<grid_for_words(bytes / 4), 256, 0, stream>>>(reinterpret_cast<const uint32_t*>(in),
                                                                          bytes / 4, first);
  return cudaGetLastError();
}
cudaError_t launch_int4_pack_frag(const uint8_t* in, uint8_t* out, int matrices, int rows, int K, cudaStream_t stream) {
  const size_t words = size_t(matrices) * rows * K / 8;
  int4_pack_frag_kernel<<<grid_for_words(words), 256, 0, stream>>>(in, reinterpret_cast<uint32_t*>(out), words, rows, K);
  return cudaGetLastError();
}
cudaError_t launch_combine(const CombineParams& cp, int blocks, int ranks, cudaStream_t stream) {
  combine_kernel<<<dim3(blocks, ranks), kCombineThreads, 0, stream>>>(cp);
  return cudaGetLastError();
}

}  // namespace xstage::moe_kernel
