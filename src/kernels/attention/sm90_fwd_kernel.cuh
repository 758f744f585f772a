#pragma once
// sm_90a FlashAttention forward kernel: params -> consumer math -> kernel.
// Warp-specialised: warpgroup 0 produces (one thread issues TMA loads of Q, K, V), warpgroups 1..n
// consume (n = 2, or 3 as a D = 64 option), each owning 64 rows of the Q tile. Per K/V block a consumer issues S = Q K^T for
// block n before it finishes the softmax of block n-1's P V (intra-warpgroup overlap), and the
// consumers take turns issuing GEMMs (named barriers) so one's softmax runs under another's GEMMs.
// The tile scheduler and the epilogue are template parameters (sched/work_tile.hpp; the epilogue
// interface is described in sm90_epilogue.cuh); the mainloop sees neither's insides.
#include <cuda.h>

#include <cstdint>

#include "sm90_fwd_config.cuh"
#include "xstage/kernel/barrier.cuh"
#include "xstage/kernel/fragment.cuh"
#include "xstage/kernel/pipeline.cuh"
#include "xstage/ptx/sync.cuh"
#include "xstage/ptx/tma.cuh"
#include "xstage/ptx/wgmma.cuh"

namespace xstage::attention::sm90 {

// ---------------------------------------------------------------- params
template <class Scheduler, class Epilogue>
struct FwdParams {
  CUtensorMap tma_q;  // (d, seqlen_q, heads, batch), box {64, kBlockM, 1, 1}
  CUtensorMap tma_k;  // (d, seqlen_kv, heads, batch), box {64, kBlockN, 1, 1}
  CUtensorMap tma_v;
  int seqlen_q, seqlen_kv;
  float scale_log2;  // softmax scale * log2(e): exp(x * scale) = exp2(x * scale_log2)
  int causal;        // bottom-right aligned: query i sees keys j <= i + seqlen_kv - seqlen_q
  typename Scheduler::Params sched;
  typename Epilogue::Params epi;
};

// Number of K/V blocks query block m_block attends to (0 only for causal rows with no visible key).
template <class C>
__host__ __device__ __forceinline__ int n_blocks_for(int m_block, int seqlen_q, int seqlen_kv, int causal) {
  int kv_end = seqlen_kv;
  if (causal) {
    const int last = (m_block + 1) * C::kBlockM + seqlen_kv - seqlen_q;  // exclusive key bound of the tile
    kv_end = last < kv_end ? last : kv_end;
  }
  return kv_end <= 0 ? 0 : (kv_end + C::kBlockN - 1) / C::kBlockN;
}

// ---------------------------------------------------------------- consumer math
// Accumulator fragments: element i of a thread sits at (kernel::frag_row(i), kernel::frag_col(i)).
template <class C>
struct Consumer {
  using E = typename C::Element;
  using MmaQK = ptx::Wgmma<C::kBlockN, C::kMma>;
  using MmaPV = ptx::Wgmma<C::kHeadDim, C::kMma>;
  static constexpr int kS = C::kBlockN / 2, kO = C::kHeadDim / 2, kPK = C::kBlockN / 16;

  // S = Q_wg K^T: both K-major; a 16-wide k step is 32 B inside a 128 B swizzled row.
  __device__ static void issue_qk(float (&s)[kS], const E* q_wg, const E* k) {
    const uint32_t qa = ptx::smem_addr(q_wg), ka = ptx::smem_addr(k);
#pragma unroll
    for (int kk = 0; kk < C::kHeadDim / 16; ++kk) {
      const uint32_t off = (kk % 4) * 32;
      const uint64_t da = ptx::make_desc_sw128(qa + (kk / 4) * C::kBlockM * 128 + off, 16, 1024);
      const uint64_t db = ptx::make_desc_sw128(ka + (kk / 4) * C::kBlockN * 128 + off, 16, 1024);
      MmaQK::ss(s, da, db, kk > 0);
    }
  }
  // O += P V: P from registers, V [kBlockN x d] MN-major (d contiguous): panels kBlockN*128 B apart.
  __device__ static void issue_pv(float (&o)[kO], const uint32_t (&p)[kPK][4], const E* v) {
    const uint32_t va = ptx::smem_addr(v);
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk)
      MmaPV::rs_tb(o, p[kk], ptx::make_desc_sw128(va + kk * 16 * 128, C::kBlockN * 128, 1024), 1);
  }

  __device__ static void mask(float (&s)[kS], int n_block, int row0, int tid, int seqlen_q, int seqlen_kv,
                              int causal) {
    const int col0 = n_block * C::kBlockN;
#pragma unroll
    for (int i = 0; i < kS; ++i) {
      const int col = col0 + kernel::frag_col(i, tid), row = row0 + kernel::frag_row(i, tid);
      if (col >= seqlen_kv || (causal && col > row + seqlen_kv - seqlen_q)) s[i] = -INFINITY;
    }
  }

  // Online softmax of one block: updates the running max/sum, turns s into exp2 values, returns the
  // factor by which earlier O rows must shrink. The row sum stays per-thread until finalise.
  __device__ static void softmax(float (&s)[kS], float (&row_max)[2], float (&row_sum)[2], float (&corr)[2],
                                 float scale_log2) {
    float mx[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int i = 0; i < kS; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == -INFINITY ? 0.f : mx[r] * scale_log2;  // a row with no key yet stays all-zero
      corr[r] = ptx::exp2_approx_ftz(row_max[r] * scale_log2 - base[r]);
      row_max[r] = mx[r];
    }
    float sum[2][2] = {{0.f, 0.f}, {0.f, 0.f}};  // [row][odd column]: two independent add chains per row
#pragma unroll
    for (int i = 0; i < kS; ++i) {
      s[i] = ptx::exp2_approx_ftz(fmaf(s[i], scale_log2, -base[(i / 2) % 2]));
      sum[(i / 2) % 2][i % 2] += s[i];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * corr[r] + (sum[r][0] + sum[r][1]);
  }

  // The accumulator fragment of columns [16kk, 16kk+16) is exactly the A fragment of k step kk.
  __device__ static void to_p(const float (&s)[kS], uint32_t (&p)[kPK][4]) {
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) p[kk][j] = kernel::pack2<E>(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
  }

  template <int N>
  __device__ static void fence(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) ptx::fence_operand(r[i]);
  }
  __device__ static void fence(uint32_t (&p)[kPK][4]) {
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) ptx::fence_operand(p[kk][j]);
  }
};

// Consumer warpgroups take turns issuing their GEMMs (no-op without ping-pong).
template <class C>
__device__ __forceinline__ void mma_turn_wait(int wg) {
  if constexpr (C::kPingPong) kernel::bar_sync(Bar::kMmaTurnWG0, 256, wg);
}
template <class C>
__device__ __forceinline__ void mma_turn_pass(int wg) {
  const int next = wg + 1 == C::kConsumerWGs ? 0 : wg + 1;
  if constexpr (C::kPingPong) kernel::bar_arrive(Bar::kMmaTurnWG0, 256, next);
}

// ---------------------------------------------------------------- kernel
template <class C, class Scheduler, class Epilogue>
__global__ void __launch_bounds__(C::kThreads, 1)
    fwd_kernel(const __grid_constant__ FwdParams<Scheduler, Epilogue> params) {
  using E = typename C::Element;
  using S = SharedStorage<C>;
  using Cons = Consumer<C>;
  extern __shared__ uint8_t smem_raw[];
  S& sh = *reinterpret_cast<S*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
  constexpr uint32_t kConsumerWarps = 4 * C::kConsumerWGs;  // each consumer warp releases a buffer once

  if (threadIdx.x == 0) {
    ptx::mbar_init(&sh.q_full, 1);
    ptx::mbar_init(&sh.q_empty, kConsumerWarps);
    for (int s = 0; s < C::kStages; ++s) {
      ptx::mbar_init(&sh.k_full[s], 1);
      ptx::mbar_init(&sh.v_full[s], 1);
      ptx::mbar_init(&sh.k_empty[s], kConsumerWarps);
      ptx::mbar_init(&sh.v_empty[s], kConsumerWarps);
    }
    ptx::fence_mbar_init_release_cluster();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---- producer: one thread issues every TMA load.
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid != 0) return;
    ptx::prefetch_tma_map(&params.tma_q);
    ptx::prefetch_tma_map(&params.tma_k);
    ptx::prefetch_tma_map(&params.tma_v);
    kernel::PipeState<C::kStages> kv;
    uint32_t q_phase = 0;
    const Scheduler sched(params.sched, blockIdx.x);
    for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) {
      const auto& c = w.tile;
      const int n_blocks = n_blocks_for<C>(c.m_block, params.seqlen_q, params.seqlen_kv, params.causal);
      ptx::mbar_wait_acquire_cta(&sh.q_empty, q_phase ^ 1);
      ptx::mbar_arrive_expect_tx_release_cta(&sh.q_full, C::kQBytes);
      for (int p = 0; p < C::kPanels; ++p)
        ptx::tma_load_4d(&params.tma_q, &sh.q_full, sh.q + p * C::kBlockM * 64, p * 64, c.m_block * C::kBlockM,
                         c.head, c.batch);
      q_phase ^= 1;
      for (int n = 0; n < n_blocks; ++n) {
        ptx::mbar_wait_acquire_cta(&sh.k_empty[kv.stage], kv.phase ^ 1);
        ptx::mbar_arrive_expect_tx_release_cta(&sh.k_full[kv.stage], C::kKVBytes);
        for (int p = 0; p < C::kPanels; ++p)
          ptx::tma_load_4d(&params.tma_k, &sh.k_full[kv.stage], sh.k[kv.stage] + p * C::kBlockN * 64, p * 64,
                           n * C::kBlockN, c.head, c.batch);
        ptx::mbar_wait_acquire_cta(&sh.v_empty[kv.stage], kv.phase ^ 1);
        ptx::mbar_arrive_expect_tx_release_cta(&sh.v_full[kv.stage], C::kKVBytes);
        for (int p = 0; p < C::kPanels; ++p)
          ptx::tma_load_4d(&params.tma_v, &sh.v_full[kv.stage], sh.v[kv.stage] + p * C::kBlockN * 64, p * 64,
                           n * C::kBlockN, c.head, c.batch);
        kv.advance();
      }
    }
    return;
  }

  // ---- consumers
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1;
  const bool warp_leader = (tid % 32) == 0;
  const E* q_wg = sh.q + wg * 64 * 64;  // this warpgroup's 64 rows inside each Q panel
  static_assert(Epilogue::kSharedStaging == C::kSharedStaging, "epilogue and config agree on staging");
  E* o_stage = sh.o + (C::kSharedStaging ? 0 : wg * 64 * C::kHeadDim);
  kernel::PipeState<C::kStages> kp, vp;
  uint32_t q_phase = 0;
  if (wg == C::kConsumerWGs - 1) mma_turn_pass<C>(wg);  // warpgroup 0 issues first
  Epilogue::init(params.epi, wg);

  const Scheduler sched(params.sched, blockIdx.x);
  for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) {
    const auto& c = w.tile;
    const int n_blocks = n_blocks_for<C>(c.m_block, params.seqlen_q, params.seqlen_kv, params.causal);
    const int row0 = c.m_block * C::kBlockM + wg * 64;
    // First block that may hold masked keys: the kv tail, or (causal) the block holding the last key
    // visible to this warpgroup's first row; every earlier block is visible to all 64 rows.
    int first_masked = params.seqlen_kv / C::kBlockN;
    if (params.causal) {
      const int last_key = row0 + params.seqlen_kv - params.seqlen_q;
      first_masked = min(first_masked, last_key < 0 ? 0 : last_key / C::kBlockN);
    }

    float o[Cons::kO];
#pragma unroll
    for (int i = 0; i < Cons::kO; ++i) o[i] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f}, corr[2];
    ptx::mbar_wait_acquire_cta(&sh.q_full, q_phase);
    q_phase ^= 1;

    if (n_blocks == 0) {
      if (warp_leader) ptx::mbar_arrive_release_cta(&sh.q_empty);
    } else {
      float s[Cons::kS];
      uint32_t p[Cons::kPK][4];
      // block 0: S only
      ptx::mbar_wait_acquire_cta(&sh.k_full[kp.stage], kp.phase);
      mma_turn_wait<C>(wg);
      ptx::wgmma_fence();
      Cons::issue_qk(s, q_wg, sh.k[kp.stage]);
      ptx::wgmma_commit();
      mma_turn_pass<C>(wg);
      ptx::wgmma_wait<0>();
      Cons::fence(s);
      if (warp_leader) ptx::mbar_arrive_release_cta(&sh.k_empty[kp.stage]);
      kp.advance();
      if (n_blocks == 1 && warp_leader) ptx::mbar_arrive_release_cta(&sh.q_empty);
      if (0 >= first_masked) Cons::mask(s, 0, row0, tid, params.seqlen_q, params.seqlen_kv, params.causal);
      Cons::softmax(s, row_max, row_sum, corr, params.scale_log2);
      Cons::to_p(s, p);

      for (int n = 1; n < n_blocks; ++n) {
        // S(n) = Q K(n)^T and O += P(n-1) V(n-1) in flight; softmax of S(n) overlaps the P V.
        ptx::mbar_wait_acquire_cta(&sh.k_full[kp.stage], kp.phase);
        ptx::mbar_wait_acquire_cta(&sh.v_full[vp.stage], vp.phase);
        mma_turn_wait<C>(wg);
        ptx::wgmma_fence();
        Cons::issue_qk(s, q_wg, sh.k[kp.stage]);
        ptx::wgmma_commit();
        // Shrink O by the previous block's factor while Q K^T runs, then accumulate P V on top.
#pragma unroll
        for (int i = 0; i < Cons::kO; ++i) o[i] *= corr[(i / 2) % 2];
        ptx::wgmma_fence();
        Cons::issue_pv(o, p, sh.v[vp.stage]);
        ptx::wgmma_commit();
        mma_turn_pass<C>(wg);
        ptx::wgmma_wait<1>();
        Cons::fence(s);
        if (warp_leader) ptx::mbar_arrive_release_cta(&sh.k_empty[kp.stage]);
        kp.advance();
        if (n == n_blocks - 1 && warp_leader) ptx::mbar_arrive_release_cta(&sh.q_empty);
        if (n >= first_masked) Cons::mask(s, n, row0, tid, params.seqlen_q, params.seqlen_kv, params.causal);
        Cons::softmax(s, row_max, row_sum, corr, params.scale_log2);
        ptx::wgmma_wait<0>();
        Cons::fence(o);
        Cons::fence(p);
        if (warp_leader) ptx::mbar_arrive_release_cta(&sh.v_empty[vp.stage]);
        vp.advance();
        Cons::to_p(s, p);
      }
      // last block: P V only
      ptx::mbar_wait_acquire_cta(&sh.v_full[vp.stage], vp.phase);
      mma_turn_wait<C>(wg);
#pragma unroll
      for (int i = 0; i < Cons::kO; ++i) o[i] *= corr[(i / 2) % 2];
      ptx::wgmma_fence();
      Cons::issue_pv(o, p, sh.v[vp.stage]);
      ptx::wgmma_commit();
      mma_turn_pass<C>(wg);
      ptx::wgmma_wait<0>();
      Cons::fence(o);
      Cons::fence(p);
      if (warp_leader) ptx::mbar_arrive_release_cta(&sh.v_empty[vp.stage]);
      vp.advance();
    }

    // finalise: full row sums across the quad, normalise, natural-log LSE (-inf for a row with no key)
    float lse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
      const bool empty = row_sum[r] == 0.f;
      corr[r] = empty ? 0.f : 1.f / row_sum[r];
      lse[r] = empty ? -INFINITY : (row_max[r] * params.scale_log2 + __log2f(row_sum[r])) * 0.6931471805599453f;
    }
#pragma unroll
    for (int i = 0; i < Cons::kO; ++i) o[i] *= corr[(i / 2) % 2];
    Epilogue::store(params.epi, o_stage, o, lse, c, row0, wg, tid);
  }
  Epilogue::finish(params.epi, wg, tid, blockIdx.x);
}

}  // namespace xstage::attention::sm90
