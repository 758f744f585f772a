// Host entry of the sm_90a attention forward kernel: builds the TMA descriptors from the params, picks
// the (dtype, head dim) instantiation and launches a persistent grid of at most one CTA per SM.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <array>
#include <atomic>
#include <cmath>
#include <mutex>

#include "sm90_fwd.hpp"
#include "sm90_fwd_kernel.cuh"

namespace xstage::attention {
namespace {

using Scheduler = sched::StaticPersistentAttnScheduler;

// cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link needed).
PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// SM count and opt-in shared memory per block, read once per device.
struct DeviceLimits {
  int sms = 0, smem_optin = 0;
};
cudaError_t device_limits(DeviceLimits* out) {
  constexpr int kMaxDevices = 64;
  static std::array<DeviceLimits, kMaxDevices> cache{};
  static std::mutex mu;
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev >= kMaxDevices) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mu);
  DeviceLimits& d = cache[dev];
  if (d.sms == 0) {
    if (cudaError_t e = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess)
      return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        e != cudaSuccess)
      return e;
  }
  *out = d;
  return cudaSuccess;
}

// (d, seq, heads, batch) view of a [batch, seq, heads, d] tensor with element strides; 128 B swizzle,
// box {64, rows, 1, 1}; out-of-bounds loads read zeros. Strides of extent-1 dims are never used, so
// they are replaced by a valid one (the encoder checks every stride).
cudaError_t make_map(CUtensorMap* map, const void* ptr, CUtensorMapDataType dtype, int d, int seq, int heads,
                     int batch, const int64_t (&stride)[3], int box_rows) {
  auto enc = encode_fn();
  if (enc == nullptr) return cudaErrorNotSupported;
  constexpr int64_t kElt = 2;
  int64_t s_seq = stride[1] * kElt, s_head = stride[2] * kElt, s_batch = stride[0] * kElt;
  if (seq == 1) s_seq = d * kElt;
  if (heads == 1) s_head = s_seq * seq;
  if (batch == 1) s_batch = s_head * heads;
  const cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(seq), cuuint64_t(heads), cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(s_seq), cuuint64_t(s_head), cuuint64_t(s_batch)};
  const cuuint32_t box[4] = {64, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  CUresult r = enc(map, dtype, 4, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <class Element, int kHeadDim>
cudaError_t launch(const xstage_attn_fwd_params& p, cudaStream_t stream) {
  using C = sm90::FwdConfig<Element, kHeadDim>;
  using Epi = sm90::LocalTmaEpilogue<Element, kHeadDim, C::kSharedStaging>;
  using Params = sm90::FwdParams<Scheduler, Epi>;
  auto kernel = sm90::fwd_kernel<C, Scheduler, Epi>;
  constexpr int kSmem = int(sizeof(sm90::SharedStorage<C>)) + 1024;  // + 1024: manual base alignment

  DeviceLimits lim;
  if (cudaError_t e = device_limits(&lim); e != cudaSuccess) return e;
  if (kSmem > lim.smem_optin) return cudaErrorInvalidConfiguration;
  // Raising the dynamic shared-memory limit is per function and device; do it once per device.
  static std::array<std::atomic<bool>, 64> configured{};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (!configured[dev].load()) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        e != cudaSuccess)
      return e;
    configured[dev].store(true);
  }

  const CUtensorMapDataType dt =
      std::is_same_v<Element, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  Params kp{};
  if (cudaError_t e = make_map(&kp.tma_q, p.q, dt, kHeadDim, p.seqlen_q, p.heads, p.batch, p.q_stride, C::kBlockM);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = make_map(&kp.tma_k, p.k, dt, kHeadDim, p.seqlen_kv, p.heads, p.batch, p.k_stride, C::kBlockN);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = make_map(&kp.tma_v, p.v, dt, kHeadDim, p.seqlen_kv, p.heads, p.batch, p.v_stride, C::kBlockN);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = make_map(&kp.epi.tma_o, p.o, dt, kHeadDim, p.seqlen_q, p.heads, p.batch, p.o_stride, 64);
      e != cudaSuccess)
    return e;
  kp.epi.lse = p.lse;
  kp.epi.seqlen_q = p.seqlen_q;
  kp.epi.heads = p.heads;
  kp.seqlen_q = p.seqlen_q;
  kp.seqlen_kv = p.seqlen_kv;
  kp.causal = p.causal != 0;
  const float scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.f / std::sqrt(float(kHeadDim));
  kp.scale_log2 = scale * 1.4426950408889634f;
  const int m_blocks = (p.seqlen_q + C::kBlockM - 1) / C::kBlockM;
  kp.sched = Scheduler::make_params(p.batch, p.heads, m_blocks, lim.sms, /*longest_first=*/kp.causal != 0);

  kernel<<<Scheduler::grid_size(kp.sched), C::kThreads, kSmem, stream>>>(kp);
  return cudaGetLastError();
}

}  // namespace

cudaError_t run_fwd_sm90(const xstage_attn_fwd_params& p, cudaStream_t stream) {
  const bool bf16 = p.dtype == XSTAGE_DTYPE_BF16;
  if (p.head_dim == 128) return bf16 ? launch<__nv_bfloat16, 128>(p, stream) : launch<__half, 128>(p, stream);
  if (p.head_dim == 64) return bf16 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__half, 64>(p, stream);
  return cudaErrorNotSupported;
}

}  // namespace xstage::attention
