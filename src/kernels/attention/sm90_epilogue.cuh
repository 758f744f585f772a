#pragma once
// Epilogues of the sm_90a attention forward kernel. The mainloop hands over one finished 64 x d output
// tile per consumer warpgroup (normalised fp32 wgmma fragments) and never learns what happens to it.
// Interface of an epilogue E (the kernel is templated on it):
//   struct E::Params;                                   host-built (E::make_* in sm90_fwd.cu), in the kernel params
//   E::kSharedStaging                                   must equal the config's (one staging buffer per
//                                                       consumer warpgroup, or one taken in turns by two)
//   E::init(params, wg)                                 once per consumer warpgroup before its first tile
//   E::store(params, smem, o, lse, tile, row0, wg, tid) all 128 threads of consumer warpgroup `wg`
//   E::finish(params, wg, tid, cta)                     once per consumer warpgroup after its last tile
// `smem` is the warpgroup's staging buffer (64 x d elements, 1024-byte aligned, 128 B swizzle).
//
// Both epilogues stage the tile in shared memory the same way (stage_tile) and differ only in where the
// TMA stores go: LocalTmaEpilogue writes the local output; PeerStoreEpilogue writes each tile straight
// into the destination rank's output (Ulysses post-attention all-to-all) and signals completion.
#include <cuda.h>

#include <cstdint>

#include "sm90_fwd_config.cuh"
#include "xstage/kernel/barrier.cuh"
#include "xstage/kernel/fragment.cuh"
#include "xstage/kernel/signal.cuh"
#include "xstage/layout/ulysses.hpp"
#include "xstage/ptx/store.cuh"
#include "xstage/ptx/sync.cuh"
#include "xstage/ptx/tma.cuh"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/sched/attention_scheduler.cuh"

namespace xstage::attention::sm90 {

// Stages the fragment tile in `smem` and has thread 0 call issue() (the TMA stores, from the staged
// panels), then writes the LSE rows. With kSharedStaging the two warpgroups take turns on one buffer
// (warpgroup 0 first each tile), else each reuses its own once the previous tile's stores have read it.
template <class C, class Issue>
__device__ __forceinline__ void stage_tile(typename C::Element* smem, const float (&o)[C::kHeadDim / 2],
                                           const float (&lse)[2], float* lse_out, int seqlen_q, int lse_row_base,
                                           int row0, int wg, int tid, Issue&& issue) {
  if constexpr (C::kSharedStaging) {
    kernel::bar_sync(Bar::kStagingWG0, 256, wg);  // the other warpgroup's store has read the buffer
  } else {
    if (tid == 0) ptx::bulk_wait_group_read<0>();  // previous tile's store has left the buffer
    kernel::bar_sync(Bar::kEpilogueWG0, 128, wg);
  }
  kernel::fragment_to_smem_sw128<typename C::Element, C::kHeadDim>(smem, o, tid);
  ptx::fence_proxy_async_shared_cta();
  kernel::bar_sync(Bar::kEpilogueWG0, 128, wg);
  if (tid == 0) {
    issue();
    ptx::bulk_commit_group();
  }
  if constexpr (C::kSharedStaging) {  // hand the buffer over once the store has read it (thread 0 arrives last)
    if (tid == 0) ptx::bulk_wait_group_read<0>();
    kernel::bar_arrive(Bar::kStagingWG0, 256, 1 - wg);
  }
  if (lse_out != nullptr && tid % 4 == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + kernel::frag_row(2 * r, tid);
      if (row < seqlen_q) lse_out[int64_t(lse_row_base) * seqlen_q + row] = lse[r];
    }
  }
}

// Before the first tile: with a shared buffer, warpgroup 0 gets it first.
template <class C>
__device__ __forceinline__ void staging_init(int wg) {
  if constexpr (C::kSharedStaging)
    if (wg == 1) kernel::bar_arrive(Bar::kStagingWG0, 256, 0);
}

// ---------------------------------------------------------------- local output
template <class C>
struct LocalTmaEpilogue {
  static constexpr bool kSharedStaging = C::kSharedStaging;
  struct Params {
    CUtensorMap tma_o;  // (d, seqlen_q, heads, batch), box {64, 64, 1, 1}; rows past seqlen_q are clipped
    float* lse;         // [batch, heads, seqlen_q] or null
    int seqlen_q, heads;
  };

  __device__ static void init(const Params&, int wg) { staging_init<C>(wg); }

  __device__ static void store(const Params& p, typename C::Element* smem, const float (&o)[C::kHeadDim / 2],
                               const float (&lse)[2], const sched::AttnTile& t, int row0, int wg, int tid) {
    stage_tile<C>(smem, o, lse, p.lse, p.seqlen_q, t.batch * p.heads + t.head, row0, wg, tid, [&] {
#pragma unroll
      for (int panel = 0; panel < C::kPanels; ++panel)
        ptx::tma_store_4d(&p.tma_o, smem + panel * 64 * 64, panel * 64, row0, t.head, t.batch);
    });
  }

  __device__ static void finish(const Params&, int, int tid, int) {
    if (tid == 0) ptx::bulk_wait_group<0>();
  }
};

// ---------------------------------------------------------------- peer output (Ulysses all-to-all)
// Source rank s computes attention over the full sequence (seqlen_q = world * seq_per_rank rows) for its
// heads_per_rank heads. Row r of head h belongs to destination rank d = r / seq_per_rank, at row
// r - d * seq_per_rank and head s * heads_per_rank + h of d's output [batch, seq_per_rank, heads_total, d].
// A tile inside one destination's rows goes out as TMA stores (rows past the sequence are clipped by the
// map). A 64-row tile that straddles destinations (seq_per_rank not a multiple of 64) is stored from the
// registers, each row to its destination: a TMA box cannot start at a negative row, and a swizzled box
// cannot start mid-atom.
//
// Completion: per CTA. After its last tile each consumer warpgroup waits for its own bulk stores to be
// complete (they have drained during the mainloop of every later tile, so only the tail waits), then one
// thread raises counter (slot, s) on every destination by one, with release semantics. A receiver that
// has seen ctas_per_group * epoch on every source's counter holds the whole output of that launch.
// (Signalling per tile instead would put a release, i.e. a wait for the tile's remote completion, right
// behind every tile's stores: the completion coupling the X-Stage design avoids.)
template <class C>
struct PeerStoreEpilogue {
  static constexpr bool kSharedStaging = C::kSharedStaging;
  struct Params {
    CUtensorMap dst[runtime::kMaxRanks];  // rank d's output (d, seq_per_rank, heads_total, batch), box {64,64,1,1}
    runtime::PeerTable dst_ptr;            // the same outputs as pointers (straddling tiles)
    int64_t dst_stride[3];                 // their element strides (batch, seq, head)
    runtime::PeerTable signal;             // rank d's signal counters; counter (slot, src) at word slot*world + src
    float* lse;                            // source-layout LSE [launch batch, heads, seqlen_q] or null
    int seqlen_q, heads;                   // source shape: full sequence, heads per rank
    int world, first_rank, batch;          // batch: per rank (the launch holds groups * batch)
    int seq_per_rank;
    int ctas_per_group;
    int slot;
  };

  __device__ static void init(const Params& p, int wg) {
    staging_init<C>(wg);
    if (threadIdx.x == 128)
      for (int d = 0; d < p.world; ++d) ptx::prefetch_tma_map(&p.dst[d]);
  }

  __device__ static void store(const Params& p, typename C::Element* smem, const float (&o)[C::kHeadDim / 2],
                               const float (&lse)[2], const sched::AttnTile& t, int row0, int wg, int tid) {
    using E = typename C::Element;
    const int src = p.first_rank + t.group, b = t.batch - t.group * p.batch;
    const layout::UlyssesOut map{p.world, p.seq_per_rank, p.heads};
    int first, last;
    map.dst_range(row0, 64, &first, &last);
    const bool straddles = last > first;
    const bool padding = last < first;  // a warpgroup's 64 rows entirely past the sequence (tail of the last block)
    stage_tile<C>(
        smem, o, lse, p.lse, p.seqlen_q, t.batch * p.heads + t.head, row0, wg, tid,
        [&] {
          if (straddles || padding) return;  // padding: dst[first] would be past the last rank
#pragma unroll
          for (int panel = 0; panel < C::kPanels; ++panel)
            ptx::tma_store_4d(&p.dst[first], smem + panel * 64 * 64, panel * 64, map.dst_row(row0, first),
                              map.dst_head(src, t.head), b);
        });
    if (straddles) {
      // Straight from the registers: each thread owns pairs of adjacent columns of 2 rows (4-byte stores;
      // such tiles are at most world - 1 per (batch, head) column). The staging buffer is not read, so its
      // turn-taking between warpgroups is untouched.
#pragma unroll
      for (int i = 0; i < C::kHeadDim / 2; i += 2) {
        const int row = row0 + kernel::frag_row(i, tid), col = kernel::frag_col(i, tid);
        if (row >= p.seqlen_q) continue;
        const int d = map.dst_rank(row);
        E* dst = p.dst_ptr.template at<E>(d) + b * p.dst_stride[0] + int64_t(map.dst_row(row, d)) * p.dst_stride[1] +
                 int64_t(map.dst_head(src, t.head)) * p.dst_stride[2] + col;
        *reinterpret_cast<uint32_t*>(dst) = kernel::pack2<E>(o[i], o[i + 1]);
      }
    }
  }

  __device__ static void finish(const Params& p, int wg, int tid, int cta) {
    __threadfence_system();  // this thread's direct stores (straddling tiles) are performed before the release
    if (tid == 0) {
      ptx::bulk_wait_group<0>();         // this warpgroup's stores are complete (performed at the peer)
      ptx::fence_proxy_async_global();  // ... and ordered before the generic-proxy release below
    }
    kernel::bar_sync(Bar::kConsumersDone, 128 * C::kConsumerWGs);
    if (wg == 0 && tid == 0) {
      const int src = p.first_rank + cta / p.ctas_per_group;
      for (int d = 0; d < p.world; ++d)
        kernel::signal_add_release(p.signal.template at<uint32_t>(d, runtime::signal_offset(p.world, p.slot, src)));
    }
  }
};

}  // namespace xstage::attention::sm90
