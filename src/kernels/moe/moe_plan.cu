// The dispatch plan on the device (moe_plan.hpp says what each kernel does and in which order).
#include "moe_plan.hpp"
#include "xstage/kernel/signal.cuh"

namespace xstage::moe_kernel {
namespace {

constexpr int kPlanThreads = 256;  // plan_count: 8 warps
constexpr int kPerThread = 4;      // consecutive (t, j) entries per thread and step
constexpr int kTablesThreads = 1024;

// Step 1: thread per token. The smallest flat index t * k + j of an invalid entry wins (the host plan's order: token,
// then slot), so the record names the entry validate_topk would.
__global__ void plan_validate_kernel(const PlanParams p) {
  const int g = blockIdx.y, t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  const int32_t* row = p.index[g] + int64_t(t) * p.topk;
  for (int j = 0; j < p.topk; ++j) {
    const int v = row[j];
    bool bad = v < 0 || v >= p.experts;
    for (int i = 0; i < j && !bad; ++i) bad = row[i] == v;
    if (bad) {
      atomicMin(&p.rec[g].first_bad, t * p.topk + j);  // t * k + j < 2^31 (check_moe_shape)
      return;
    }
  }
}

// Step 2: CTA (e, g) walks local rank g's entries in (t, j) order, kPlanThreads * kPerThread at a time: the entries
// routed to e get their ordinal among them (pos) from a scan of the per-thread matches, so the ordinals follow the
// host plan's (source, token, slot) order exactly. Every CTA reads the whole [T][k] table (from L2: E x T x k x 4
// bytes per rank, ~0.3 GB for DeepSeek-V4-Pro at 32768 tokens).
__global__ void __launch_bounds__(kPlanThreads) plan_count_kernel(const PlanParams p) {
  const int e = blockIdx.x, g = blockIdx.y, s = p.view.first_rank + g;
  const int n = p.tokens * p.topk, E = p.experts;
  const int first_bad = p.rec[g].first_bad;
  const bool bad = first_bad != kPlanClean;  // plan the stand-in routing (t * k + j) mod E instead
  const int32_t* idx = p.index[g];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ int warp_total[kPlanThreads / 32];
  int base = 0;  // entries routed to e before this step
  for (int q0 = 0; q0 < n; q0 += kPlanThreads * kPerThread) {
    const int q = q0 + threadIdx.x * kPerThread;
    int v[kPerThread];
    int mine = 0;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int qi = q + i;
      v[i] = qi < n ? (bad ? qi % E : __ldg(idx + qi)) : -1;
      mine += v[i] == e ? 1 : 0;
    }
    int incl = mine;  // inclusive scan over the warp's lanes
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    int ord = base + incl - mine, total = 0;
#pragma unroll
    for (int w = 0; w < kPlanThreads / 32; ++w) {
      const int c = warp_total[w];
      total += c;
      if (w < warp) ord += c;
    }
    if (mine != 0) {
#pragma unroll
      for (int i = 0; i < kPerThread; ++i)
        if (v[i] == e) {
          p.idx_out[g][q + i] = e;
          p.pos_out[g][q + i] = ord++;
        }
    }
    base += total;
    __syncthreads();  // warp_total is rewritten by the next step
  }
  if (threadIdx.x == 0) {
    for (int d = 0; d < p.view.world; ++d) *p.counts.at<int>(d, (size_t(s) * E + e) * sizeof(int)) = base;
    __threadfence_system();  // performed before plan_signal's release (a later kernel on this stream)
    if (bad && e == 0) {
      // Name the entry the way validate_topk does: out of range, or the earlier slot it repeats.
      const int t = first_bad / p.topk, j = first_bad % p.topk;
      const int32_t* row = idx + int64_t(t) * p.topk;
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
        __threadfence_system();
      }
    }
  }
}

// Step 3: local rank g's counts are in every rank's table (the previous kernel's stores, fenced): one release per
// destination.
__global__ void plan_signal_kernel(const PlanParams p) {
  const int g = threadIdx.x;
  if (g >= p.view.ranks) return;
  const int s = p.view.first_rank + g;
  __threadfence_system();
  for (int d = 0; d < p.view.world; ++d)
    kernel::signal_add_release(p.signal.at<uint32_t>(d, runtime::signal_offset(p.view.world, p.signal_slot, s)));
}

// Step 5 (after the wait for every source): the tables of dispatch_layout.hpp from the gathered counts [P][E] (local
// rank first_rank's copy; every local rank's holds the same rows).
__global__ void __launch_bounds__(kTablesThreads) plan_tables_kernel(const PlanParams p) {
  const int P = p.view.world, E = p.experts, El = E / P, first = p.view.first_rank;
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

}  // namespace

cudaError_t launch_plan_counts(const PlanParams& pp, cudaStream_t stream) {
  const int ranks = pp.view.ranks;
  plan_validate_kernel<<<dim3((pp.tokens + 255) / 256, ranks), 256, 0, stream>>>(pp);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  plan_count_kernel<<<dim3(pp.experts, ranks), kPlanThreads, 0, stream>>>(pp);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  plan_signal_kernel<<<1, 32, 0, stream>>>(pp);
  return cudaGetLastError();
}

cudaError_t launch_plan_tables(const PlanParams& pp, cudaStream_t stream) {
  plan_tables_kernel<<<1, kTablesThreads, 0, stream>>>(pp);
  return cudaGetLastError();
}

}  // namespace xstage::moe_kernel
