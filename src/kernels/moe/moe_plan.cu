// The dispatch plan on the device (moe_plan.hpp says what each kernel does and in which order).
#include "moe_plan.hpp"
#include "xstage/common/hash.hpp"
#include "xstage/kernel/signal.cuh"
#include "xstage/moe/dispatch_layout.hpp"

namespace xstage::moe_kernel {
namespace {

constexpr int kScanThreads = 256;
constexpr int kScanBatch = 16;  // plan_scan: chunk counts loaded at once
constexpr int kTablesThreads = 1024;

// Stand-in count: entries q in [0, x) with q mod E == e.
__device__ __forceinline__ int64_t stand_in_below(int64_t x, int e, int E) { return x > e ? (x - e + E - 1) / E : 0; }

// Step 1: CTA per chunk, thread per token. The smallest flat index t * k + j of an invalid entry wins (the host plan's
// order: token, then slot), so the record names the entry validate_topk would. The chunk's counts per expert go to
// hist (plan_scan ignores them where the rank's routing is invalid).
__global__ void __launch_bounds__(kPlanChunkTokens) plan_hist_kernel(const PlanParams p) {
  extern __shared__ int count[];  // [E]
  const int c = blockIdx.x, g = blockIdx.y, E = p.experts, K = p.topk;
  if (c == 0 && g == 0 && threadIdx.x == 0) *p.plan_epoch += 1;  // one release per source and call (plan_tables waits)
  for (int e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  const int t = c * kPlanChunkTokens + threadIdx.x;
  if (t < p.tokens[g]) {
    const int32_t* row = p.index[g] + int64_t(t) * K;
    for (int j = 0; j < K; ++j) {
      const int v = row[j];
      bool bad = v < 0 || v >= E;
      for (int i = 0; i < j && !bad; ++i) bad = row[i] == v;
      if (bad) {
        atomicMin(&p.rec[g].first_bad, t * K + j);  // t * k + j < 2^31 (check_moe_shape)
        break;
      }
      atomicAdd(&count[v], 1);
    }
  }
  __syncthreads();
  int32_t* out = p.hist + (size_t(g) * p.chunks + c) * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) out[e] = count[e];
}

// Step 2: thread per expert. hist's counts become each chunk's base; the rank's count goes into every rank's counts
// table (peer stores, fenced); the rank's last CTA to finish raises every rank's plan signal (the other CTAs' fences
// precede their increments of `done`, which it has seen).
__global__ void __launch_bounds__(kScanThreads) plan_scan_kernel(const PlanParams p) {
  const int g = blockIdx.y, s = p.view.first_rank + g, E = p.experts, K = p.topk, C = p.chunks;
  const int first_bad = p.rec[g].first_bad;
  const bool bad = first_bad != kPlanClean;  // plan the stand-in routing (t * k + j) mod E instead
  const int64_t n = int64_t(p.tokens[g]) * K, per_chunk = int64_t(kPlanChunkTokens) * K;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e < E) {
    int32_t* h = p.hist + size_t(g) * C * E + e;
    int run = 0;
    // kScanBatch chunks' counts loaded together, then their bases stored: the loads are not serialised behind the
    // stores to the same array.
    for (int c0 = 0; c0 < C; c0 += kScanBatch) {
      int cnt[kScanBatch];
#pragma unroll
      for (int i = 0; i < kScanBatch; ++i) {
        const int c = c0 + i;
        if (c >= C) {
          cnt[i] = 0;
        } else if (bad) {
          const int64_t q0 = c * per_chunk, q1 = q0 + per_chunk < n ? q0 + per_chunk : n;
          cnt[i] = int(stand_in_below(q1, e, E) - stand_in_below(q0, e, E));
        } else {
          cnt[i] = h[size_t(c) * E];
        }
      }
#pragma unroll
      for (int i = 0; i < kScanBatch; ++i) {
        if (c0 + i < C) h[size_t(c0 + i) * E] = run;
        run += cnt[i];
      }
    }
    for (int d = 0; d < p.view.world; ++d) *p.counts.at<int>(d, (size_t(s) * E + e) * sizeof(int)) = run;
  }
  if (bad && blockIdx.x == 0 && threadIdx.x == 0) {
    // Name the entry the way validate_topk does: out of range, or the earlier slot it repeats.
    const int t = first_bad / K, j = first_bad % K;
    const int32_t* row = p.index[g] + int64_t(t) * K;
    const int value = row[j];
    int code = 1, repeats = -1;
    if (value >= 0 && value < E)
      for (int i = 0; i < j; ++i)
        if (row[i] == value) {
          code = 2;
          repeats = i;
          break;
        }
    if (atomicCAS(&p.err->code, 0, code) == 0) {
      p.err->rank = s;
      p.err->token = t;
      p.err->slot = j;
      p.err->value = value;
      p.err->repeats = repeats;
    }
  }
  __threadfence_system();  // this thread's count stores (and the error record) before the CTA's increment below
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&p.rec[g].done, 1) == kPlanClean + int(gridDim.x) - 1) {
    __threadfence_system();
    for (int d = 0; d < p.view.world; ++d)
      kernel::signal_add_release(p.signal.at<uint32_t>(d, runtime::signal_offset(p.view.world, p.signal_slot, s)));
  }
}

// Step 3: one warp per chunk walks its entries in order, 32 at a time: lanes holding the same expert rank themselves
// by lane (match), and the expert's next ordinal advances by their number (shared memory, the chunk's bases first).
// The loads of kAhead groups are issued together: the walk itself is a serial chain (s51 call 3: one load per group
// on it made a 2048-entry chunk's walk ~20 us).
constexpr int kAhead = 16;
__global__ void __launch_bounds__(32) plan_ordinals_kernel(const PlanParams p) {
  extern __shared__ int next[];  // [E]
  const int c = blockIdx.x, g = blockIdx.y, E = p.experts, K = p.topk, lane = threadIdx.x;
  const int32_t* base = p.hist + (size_t(g) * p.chunks + c) * E;
  for (int e = lane; e < E; e += 32) next[e] = base[e];
  __syncwarp();
  const bool bad = p.rec[g].first_bad != kPlanClean;
  const int32_t* idx = p.index[g];
  int32_t* idx_out = p.idx_out[g];
  int32_t* pos_out = p.pos_out[g];
  const int64_t n = int64_t(p.tokens[g]) * K, q0 = int64_t(c) * kPlanChunkTokens * K;
  const int64_t q1 = q0 + int64_t(kPlanChunkTokens) * K < n ? q0 + int64_t(kPlanChunkTokens) * K : n;
  for (int64_t b0 = q0; b0 < q1; b0 += 32 * kAhead) {
    int v[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int64_t q = b0 + 32 * i + lane;
      v[i] = q < q1 ? (bad ? int(q % E) : __ldg(idx + q)) : -1;
    }
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int64_t q = b0 + 32 * i + lane;
      const bool in = q < q1;
      const unsigned m = __match_any_sync(0xffffffffu, v[i]);
      const int rank = __popc(m & ((1u << lane) - 1u));
      const int ord = in ? next[v[i]] + rank : 0;
      __syncwarp();
      if (in && rank == 0) next[v[i]] += __popc(m);
      __syncwarp();
      if (in) {
        idx_out[q] = v[i];
        pos_out[q] = ord;
      }
    }
  }
}

// Steps 4 and 5: wait (acquire, the team's timeout) until every source's counts are in local rank first_rank's copy
// (every local rank's holds the same rows), then the tables of dispatch_layout.hpp from the gathered counts [P][E].
__global__ void __launch_bounds__(kTablesThreads) plan_tables_kernel(const PlanParams p) {
  const int P = p.view.world, E = p.experts, El = E / P, first = p.view.first_rank;
  if (threadIdx.x < P)
    kernel::signal_wait_geq(p.signal.at<uint32_t>(first, runtime::signal_offset(P, p.signal_slot, int(threadIdx.x))),
                            *p.plan_epoch, p.timeout_ns, p.team_err,
                            kernel::SignalWaitInfo{first, int(threadIdx.x), p.signal_slot});
  __syncthreads();  // the waits' acquires before every thread's reads
  const int* c = p.counts.at<const int>(first);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int acc = 0;  // src_base: exclusive prefix over the sources
    for (int s = 0; s < P; ++s) {
      const int n = c[s * E + e];
      p.t_counts[s * E + e] = n;
      p.t_base[s * E + e] = acc;
      acc += n;
    }
    const int d = e / El;
    if (d >= first && d < first + p.view.ranks) p.t_tok[(d - first) * El + e % El] = acc;
  }
  // row_offset[d][le]: the prefix over rank d's experts of their b_m-row tiles; warp d scans rank d.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int d = warp; d < P; d += blockDim.x / 32) {
    int* off = p.t_off + d * (El + 1);
    if (lane == 0) off[0] = 0;
    int run = 0;
    for (int l0 = 0; l0 < El; l0 += 32) {
      const int le = l0 + lane;
      int rows = 0;
      if (le < El) {
        int tot = 0;
        for (int s = 0; s < P; ++s) tot += c[s * E + d * El + le];
        rows = (tot + p.b_m - 1) / p.b_m;
      }
      int incl = rows;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      if (le < El) off[le + 1] = run + incl;
      run += __shfl_sync(0xffffffffu, incl, 31);
    }
  }
}

// Zeroes local rank g's expert le's loaded padding rows (PaddingZero; blocks walk the (g, le) items).
__device__ void zero_padding_item(const PaddingZero& pz, int item) {
  const int g = item / pz.experts, le = item - g * pz.experts;
  const int n = pz.tokens[size_t(g) * pz.experts + le];
  const moe::PaddingRows pad = moe::loaded_padding_rows(n, pz.b_m, pz.whole);
  if (pad.scale_end == pad.begin) return;
  const size_t block = size_t(pz.row_offset[size_t(g) * (pz.experts + 1) + le]) * pz.b_m;  // the expert's first row
  const size_t words = size_t(pz.row_bytes / 16);  // 16-byte words per row
  uint4* x = reinterpret_cast<uint4*>(pz.x + (size_t(g) * pz.rows_cap + block + pad.begin) * pz.row_bytes);
  const size_t nx = size_t(pad.end - pad.begin) * words;
  for (size_t i = threadIdx.x; i < nx; i += blockDim.x) x[i] = make_uint4(0, 0, 0, 0);
  if (pz.kblocks == 0) return;  // a bf16 workspace: no row scales
  const int ns = pad.scale_end - pad.begin;  // per K block, rows [begin, scale_end) of the tile's 128-row scale box
  float* sa = pz.sa + size_t(g) * pz.kblocks * pz.rows_cap + block;
  for (int i = threadIdx.x; i < pz.kblocks * ns; i += blockDim.x) {
    const int kb = i / ns, r = pad.begin + i - kb * ns;
    sa[size_t(kb) * pz.rows_cap + r] = 0.f;
  }
}

__global__ void call_prologue_kernel(uint32_t* row_ready, size_t words, uint32_t* epochs, uint32_t ctas,
                                     const PaddingZero pz) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    row_ready[i] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    epochs[0] += ctas;  // kSlotDispatch
    epochs[1] += ctas;  // kSlotCombine
  }
  for (int item = blockIdx.x; item < pz.ranks * pz.experts; item += gridDim.x) zero_padding_item(pz, item);
}

__global__ void fill_random_kernel(void* p, size_t n, int elem, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t h = hash::lowbias32(uint32_t(i) * 0x9e3779b9U ^ hash::lowbias32(seed + uint32_t(i >> 32)));
    if (elem == 1) {
      static_cast<uint8_t*>(p)[i] = hash::finite_e4m3(h);
    } else if (elem == 2) {  // bf16 of a float in (-4, 4)
      const float v = (float(h >> 8) * (1.0f / 16777216.0f) - 0.5f) * 8.0f;
      static_cast<uint16_t*>(p)[i] = uint16_t(__float_as_uint(v) >> 16);
    } else {
      static_cast<float*>(p)[i] = (1.0f + float(h >> 8) * (1.0f / 16777216.0f)) * (1.0f / 448.0f);
    }
  }
}

}  // namespace

cudaError_t launch_call_prologue(uint32_t* row_ready, size_t words, uint32_t* epochs, uint32_t ctas,
                                 const PaddingZero& pz, cudaStream_t stream) {
  size_t blocks = (words + 255) / 256;
  blocks = blocks < size_t(pz.ranks) * pz.experts ? size_t(pz.ranks) * pz.experts : blocks;
  call_prologue_kernel<<<unsigned(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks), 256, 0, stream>>>(row_ready, words,
                                                                                                     epochs, ctas, pz);
  return cudaGetLastError();
}

cudaError_t launch_fill_random(void* p, size_t n, int elem, uint32_t seed, cudaStream_t stream) {
  if (elem != 1 && elem != 2 && elem != 4) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const size_t blocks = (n + 255) / 256;
  fill_random_kernel<<<unsigned(blocks > 4096 ? 4096 : blocks), 256, 0, stream>>>(p, n, elem, seed);
  return cudaGetLastError();
}

cudaError_t launch_plan_counts(const PlanParams& pp, cudaStream_t stream) {
  const int ranks = pp.view.ranks;
  const size_t smem = size_t(pp.experts) * sizeof(int);  // a counter per expert
  if (smem > 48 * 1024) {  // beyond the default dynamic shared memory (E > 12288)
    if (cudaError_t e = cudaFuncSetAttribute(plan_hist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
      return e;
    if (cudaError_t e = cudaFuncSetAttribute(plan_ordinals_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             int(smem));
        e != cudaSuccess)
      return e;
  }
  plan_hist_kernel<<<dim3(pp.chunks, ranks), kPlanChunkTokens, smem, stream>>>(pp);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  plan_scan_kernel<<<dim3((pp.experts + kScanThreads - 1) / kScanThreads, ranks), kScanThreads, 0, stream>>>(pp);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  plan_ordinals_kernel<<<dim3(pp.chunks, ranks), 32, smem, stream>>>(pp);
  return cudaGetLastError();
}

cudaError_t launch_plan_tables(const PlanParams& pp, cudaStream_t stream) {
  plan_tables_kernel<<<1, kTablesThreads, 0, stream>>>(pp);
  return cudaGetLastError();
}

}  // namespace xstage::moe_kernel
