// Host entry of the sm_90a attention forward kernel: builds the TMA descriptors from the params, picks
// the (dtype, head dim) instantiation and the epilogue (local output, or every tile to its destination
// rank), and launches a persistent grid of at most one CTA per SM.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <array>
#include <atomic>
#include <cmath>
#include <mutex>

#include "xstage/runtime/tensor_map.hpp"
#include "sm90_epilogue.cuh"
#include "sm90_fwd.hpp"
#include "sm90_fwd_kernel.cuh"

namespace xstage::attention {
namespace {

using namespace sm90;

using Scheduler = sched::StaticPersistentAttnScheduler;


// SM count, opt-in shared memory per block and L2 size, read once per device.
struct DeviceLimits {
  int sms = 0, smem_optin = 0, l2_bytes = 0;
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
    if (cudaError_t e = cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, dev); e != cudaSuccess) return e;
  }
  *out = d;
  return cudaSuccess;
}

// (d, seq, heads, batch) view of a [batch, seq, heads, d] tensor with element strides; 128 B swizzle,
// box {64, rows, 1, 1}; out-of-bounds loads read zeros. Strides of extent-1 dims are never used, so
// they are replaced by a valid one (the encoder checks every stride).
cudaError_t make_map(CUtensorMap* map, const void* ptr, CUtensorMapDataType dtype, int d, int seq, int heads,
                     int batch, const int64_t (&stride)[3], int box_rows) {
  auto enc = runtime::tensor_map_encoder();
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

// ---------------------------------------------------------------- launch, in two steps
// 1. The mainloop's parameters (Q/K/V maps, lengths, scale, scheduler) from the user's params; `groups`
//    rank groups share the launch (each owns p.batch / groups batch entries and ctas_per_group CTAs).
// 2. The epilogue's parameters, built by the caller for its epilogue type; then one launch.
template <class C, class Epi>
cudaError_t make_mainloop(const xstage_attn_fwd_params& p, int groups, int ctas, FwdParams<Scheduler, Epi>* kp) {
  DeviceLimits lim;
  if (cudaError_t e = device_limits(&lim); e != cudaSuccess) return e;
  using E = typename C::Element;
  const CUtensorMapDataType dt =
      std::is_same_v<E, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (cudaError_t e = make_map(&kp->tma_q, p.q, dt, C::kHeadDim, p.seqlen_q, p.heads, p.batch, p.q_stride, C::kBlockM);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = make_map(&kp->tma_k, p.k, dt, C::kHeadDim, p.seqlen_kv, p.heads, p.batch, p.k_stride, C::kBlockN);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = make_map(&kp->tma_v, p.v, dt, C::kHeadDim, p.seqlen_kv, p.heads, p.batch, p.v_stride, C::kBlockN);
      e != cudaSuccess)
    return e;
  kp->seqlen_q = p.seqlen_q;
  kp->seqlen_kv = p.seqlen_kv;
  kp->causal = p.causal != 0;
  const float scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.f / std::sqrt(float(C::kHeadDim));
  kp->scale_log2 = scale * 1.4426950408889634f;
  const int m_blocks = (p.seqlen_q + C::kBlockM - 1) / C::kBlockM;
  // Causal: LPT within groups of (batch, head) pairs sized by the L2 (attention_scheduler.cuh); rank groups
  // running side by side share the L2.
  const int pairs = p.batch / groups * p.heads;
  const long long kv_pair_bytes = 2LL * p.seqlen_kv * C::kHeadDim * int(sizeof(E));
  const int per_group_ctas = Scheduler::make_params(p.batch / groups, p.heads, m_blocks, ctas, false, groups).ctas;
  const int lpt_group =
      Scheduler::lpt_group_pairs(pairs, m_blocks, per_group_ctas, kv_pair_bytes, lim.l2_bytes / groups,
                                 XSTAGE_ATTN_LPT_MIN_ROUNDS, XSTAGE_ATTN_LPT_MIN_GROUPS);
  kp->sched = Scheduler::make_params(p.batch / groups, p.heads, m_blocks, ctas, /*longest_first=*/kp->causal != 0,
                                     groups, lpt_group);
  return cudaSuccess;
}

// A launch serving several rank groups is cooperative: its CTAs wait on each other's ranks (through the
// epilogue's signals and later kernels' waits), so they must all be resident; a cooperative launch that
// cannot make them so fails (cudaErrorCooperativeLaunchTooLarge) instead of deadlocking.
template <class C, class Epi>
cudaError_t launch_kernel(const FwdParams<Scheduler, Epi>& kp, bool cooperative, cudaStream_t stream) {
  auto kernel = fwd_kernel<C, Scheduler, Epi>;
  constexpr int kSmem = int(sizeof(SharedStorage<C>)) + 1024;  // + 1024: manual base alignment
  DeviceLimits lim;
  if (cudaError_t e = device_limits(&lim); e != cudaSuccess) return e;
  if (kSmem > lim.smem_optin) return cudaErrorInvalidConfiguration;
  // Raising the dynamic shared-memory limit is per function and device; do it once per device.
  static std::array<std::atomic<bool>, 64> configured{};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev >= 64) return cudaErrorInvalidDevice;
  if (!configured[dev].load()) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        e != cudaSuccess)
      return e;
    configured[dev].store(true);
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(Scheduler::grid_size(kp.sched));
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cooperative ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, kp);
}

// groups > 1: the launch serves `groups` ranks (p.batch = groups x their batch), each on sms_per_group SMs
// (emulated ranks: the same partition as the peer-store launch, so the two time the same schedule).
template <class Element, int kHeadDim>
cudaError_t run_local(const xstage_attn_fwd_params& p, int groups, int sms_per_group, cudaStream_t stream) {
  using C = FwdConfig<Element, kHeadDim>;
  using Epi = LocalTmaEpilogue<C>;
  DeviceLimits lim;
  if (cudaError_t e = device_limits(&lim); e != cudaSuccess) return e;
  if (groups < 1 || p.batch % groups != 0) return cudaErrorInvalidValue;
  const int ctas = groups == 1 ? lim.sms : sms_per_group * groups;
  FwdParams<Scheduler, Epi> kp{};
  if (cudaError_t e = make_mainloop<C>(p, groups, ctas, &kp); e != cudaSuccess) return e;
  const CUtensorMapDataType dt =
      std::is_same_v<Element, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (cudaError_t e = make_map(&kp.epi.tma_o, p.o, dt, kHeadDim, p.seqlen_q, p.heads, p.batch, p.o_stride, 64);
      e != cudaSuccess)
    return e;
  kp.epi.lse = p.lse;
  kp.epi.seqlen_q = p.seqlen_q;
  kp.epi.heads = p.heads;
  return launch_kernel<C>(kp, /*cooperative=*/groups > 1, stream);
}

template <class Element, int kHeadDim>
cudaError_t run_to_peers(const xstage_attn_fwd_params& p, const PeerOutput& out, int* ctas_per_rank,
                         cudaStream_t stream) {
  using C = FwdConfig<Element, kHeadDim>;
  using Epi = PeerStoreEpilogue<C>;
  const int groups = out.view.ranks;
  FwdParams<Scheduler, Epi> kp{};
  if (cudaError_t e = make_mainloop<C>(p, groups, out.sms_per_rank * groups, &kp); e != cudaSuccess) return e;
  const CUtensorMapDataType dt =
      std::is_same_v<Element, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const int heads_total = p.heads * out.view.world;
  for (int d = 0; d < out.view.world; ++d)
    if (cudaError_t e = make_map(&kp.epi.dst[d], out.dst[d], dt, kHeadDim, out.seq_per_rank, heads_total, out.batch,
                                 out.dst_stride, 64);
        e != cudaSuccess)
      return e;
  for (int d = 0; d < out.view.world; ++d) kp.epi.dst_ptr.base[d] = static_cast<char*>(out.dst[d]);
  for (int i = 0; i < 3; ++i) kp.epi.dst_stride[i] = out.dst_stride[i];
  kp.epi.signal = out.signal;
  kp.epi.lse = p.lse;
  kp.epi.seqlen_q = p.seqlen_q;
  kp.epi.heads = p.heads;
  kp.epi.world = out.view.world;
  kp.epi.first_rank = out.view.first_rank;
  kp.epi.batch = out.batch;
  kp.epi.seq_per_rank = out.seq_per_rank;
  kp.epi.ctas_per_group = kp.sched.ctas;
  kp.epi.slot = out.slot;
  if (ctas_per_rank != nullptr) *ctas_per_rank = kp.sched.ctas;
  return launch_kernel<C>(kp, /*cooperative=*/groups > 1, stream);
}

}  // namespace

cudaError_t run_fwd_sm90(const xstage_attn_fwd_params& p, cudaStream_t stream) {
  return run_fwd_sm90_grouped(p, 1, 0, stream);
}

namespace {
// Calls f(Type<Element>{}, std::integral_constant<int, kHeadDim>{}) for p's compile-time variant.
template <class T>
struct Type {
  using type = T;
};
template <class F>
cudaError_t with_variant(const xstage_attn_fwd_params& p, F&& f) {
  const bool bf16 = p.dtype == XSTAGE_DTYPE_BF16;
  if (p.head_dim == 128)
    return bf16 ? f(Type<__nv_bfloat16>{}, std::integral_constant<int, 128>{})
                : f(Type<__half>{}, std::integral_constant<int, 128>{});
  if (p.head_dim == 64)
    return bf16 ? f(Type<__nv_bfloat16>{}, std::integral_constant<int, 64>{})
                : f(Type<__half>{}, std::integral_constant<int, 64>{});
  return cudaErrorNotSupported;
}
}  // namespace

cudaError_t run_fwd_sm90_grouped(const xstage_attn_fwd_params& p, int groups, int sms_per_group,
                                 cudaStream_t stream) {
  return with_variant(p, [&](auto e, auto d) {
    return run_local<typename decltype(e)::type, decltype(d)::value>(p, groups, sms_per_group, stream);
  });
}

std::string check_peer_output(const xstage_attn_fwd_params& p, const PeerOutput& out) {
  const auto& v = out.view;
  if (v.world < 1 || v.world > runtime::kMaxRanks)
    return "world size " + std::to_string(v.world) + " is outside [1, " + std::to_string(runtime::kMaxRanks) + "]";
  if (v.ranks < 1 || v.first_rank < 0 || v.first_rank + v.ranks > v.world)
    return "ranks [" + std::to_string(v.first_rank) + ", " + std::to_string(v.first_rank + v.ranks) +
           ") served by this launch do not lie in the world of " + std::to_string(v.world);
  if (out.batch < 1 || p.batch != out.batch * v.ranks)
    return "launch batch " + std::to_string(p.batch) + " must be " + std::to_string(v.ranks) +
           " ranks x the per-rank batch " + std::to_string(out.batch);
  if (out.seq_per_rank < 1 || int64_t(out.seq_per_rank) * v.world != p.seqlen_q)
    return "seqlen_q " + std::to_string(p.seqlen_q) + " must be world (" + std::to_string(v.world) +
           ") x seq_per_rank (" + std::to_string(out.seq_per_rank) + ")";
  if (out.sms_per_rank < 1) return "sms_per_rank must be positive, got " + std::to_string(out.sms_per_rank);
  for (int d = 0; d < v.world; ++d) {
    if (out.dst[d] == nullptr) return "destination of rank " + std::to_string(d) + " is null";
    if (reinterpret_cast<uintptr_t>(out.dst[d]) % 16 != 0)
      return "destination of rank " + std::to_string(d) + " is not 16-byte aligned";
    if (out.signal.base[d] == nullptr) return "signal counters of rank " + std::to_string(d) + " are null";
  }
  for (int i = 0; i < 3; ++i)
    if (out.dst_stride[i] <= 0 || out.dst_stride[i] % 8 != 0)
      return "dst_stride[" + std::to_string(i) + "] = " + std::to_string(out.dst_stride[i]) +
             " must be a positive multiple of 8 elements";
  if (out.slot < 0) return "signal slot must be >= 0, got " + std::to_string(out.slot);
  return "";
}

cudaError_t run_fwd_sm90_to_peers(const xstage_attn_fwd_params& p, const PeerOutput& out, int* ctas_per_rank,
                                  cudaStream_t stream) {
  if (!check_peer_output(p, out).empty()) return cudaErrorInvalidValue;
  return with_variant(p, [&](auto e, auto d) {
    return run_to_peers<typename decltype(e)::type, decltype(d)::value>(p, out, ctas_per_rank, stream);
  });
}

}  // namespace xstage::attention
