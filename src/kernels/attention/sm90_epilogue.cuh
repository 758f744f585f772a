#pragma once
// Epilogues of the sm_90a attention forward kernel. The mainloop hands over one finished b_m x d output
// tile per consumer warpgroup (64 x d, normalised, fp32 wgmma fragments) and never learns what happens
// to it. Interface of an epilogue E:
//   struct E::Params;                        host-built, lives in the kernel parameters
//   E::store(params, smem, o, lse, coord, wg, tid)  all 128 threads of consumer warpgroup `wg`
//   E::init(wg)                              once per warpgroup before the first tile
//   E::finish(params, tid)                    once per warpgroup before the kernel ends
//   E::kSharedStaging                         false: one 64 x d staging buffer per consumer warpgroup;
//                                             true: one buffer taken in turns by two warpgroups
// `smem` is the warpgroup's staging buffer (64 x d elements, 1024-byte aligned, 128 B swizzle).
// The next issue swaps LocalTmaEpilogue for one that stores the tile to a peer rank (Ulysses all-to-all).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "xstage/ptx/sync.cuh"
#include "xstage/ptx/tma.cuh"
#include "xstage/sched/attention_scheduler.cuh"

namespace xstage::attention::sm90 {

// Named barriers (0 is __syncthreads); "+ wg" ids take one slot per consumer warpgroup (at most 3).
enum class NamedBarrier : uint32_t {
  kEpilogueWG0 = 1,  // + wg: consumer warpgroup wg's staging buffer is free / filled (128 threads)
  kMmaTurnWG0 = 4,   // + wg: consumer warpgroup wg may issue its GEMMs (ping-pong, 256 threads)
  kStagingWG0 = 7,   // + wg: a staging buffer shared by two warpgroups is wg's to fill (256 threads)
};

template <class Element>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// Writes the 64 x kHeadDim fragment tile into `smem` as 64-column panels of 64 rows x 128 B, 16-byte
// chunks XOR-swizzled by row (the TMA 128 B swizzle); conflict-free for the wgmma fragment layout.
template <class Element, int kHeadDim>
__device__ __forceinline__ void fragment_to_smem_sw128(Element* smem, const float (&o)[kHeadDim / 2], int tid) {
  const int warp = tid / 32, lane = tid % 32;
  uint8_t* base = reinterpret_cast<uint8_t*>(smem);
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; i += 2) {
    const int row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
    const int col = 8 * (i / 4) + 2 * (lane % 4);
    const int panel = col / 64, byte = (col % 64) * 2;
    const int off = panel * 64 * 128 + row * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16;
    *reinterpret_cast<uint32_t*>(base + off) = pack2<Element>(o[i], o[i + 1]);
  }
}

// Local store: staging in shared memory, then one TMA store per 64-column panel (rows past seqlen_q
// are clipped by the tensor map). LSE written by the quad leaders. With kSharedStaging (shared memory
// too tight for two buffers) the warpgroups take turns on one buffer, warpgroup 0 first each tile.
template <class Element, int kHeadDim, bool kSharedStaging_>
struct LocalTmaEpilogue {
  static constexpr bool kSharedStaging = kSharedStaging_;  // one buffer for two warpgroups, else one each
  struct Params {
    CUtensorMap tma_o;  // (d, seqlen_q, heads, batch), box {64, 64, 1, 1}
    float* lse;         // [batch, heads, seqlen_q] or null
    int seqlen_q, heads;
  };

  __device__ static void store(const Params& p, Element* smem, const float (&o)[kHeadDim / 2],
                               const float (&lse)[2], sched::AttnBlockCoord c, int row0, int wg, int tid) {
    const uint32_t bar = uint32_t(NamedBarrier::kEpilogueWG0) + wg;
    if constexpr (kSharedStaging) {
      ptx::named_barrier_sync(uint32_t(NamedBarrier::kStagingWG0) + wg, 256);  // the other one's store has read it
    } else {
      if (tid == 0) ptx::tma_store_wait_read();  // previous tile's store has left the buffer
      ptx::named_barrier_sync(bar, 128);
    }
    fragment_to_smem_sw128<Element, kHeadDim>(smem, o, tid);
    ptx::fence_proxy_async_shared_cta();
    ptx::named_barrier_sync(bar, 128);
    if (tid == 0) {
#pragma unroll
      for (int panel = 0; panel < kHeadDim / 64; ++panel)
        ptx::tma_store_4d(&p.tma_o, smem + panel * 64 * 64, panel * 64, row0, c.head, c.batch);
      ptx::tma_store_commit();
    }
    if constexpr (kSharedStaging) {  // hand the buffer over once the store has read it (thread 0 arrives last)
      if (tid == 0) ptx::tma_store_wait_read();
      ptx::named_barrier_arrive(uint32_t(NamedBarrier::kStagingWG0) + (1 - wg), 256);
    }
    if (p.lse != nullptr && tid % 4 == 0) {
      const int warp = tid / 32, lane = tid % 32;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 16 * warp + lane / 4 + 8 * r;
        if (row < p.seqlen_q) p.lse[(int64_t(c.batch) * p.heads + c.head) * p.seqlen_q + row] = lse[r];
      }
    }
  }

  // Before the first tile: warpgroup 0 gets the shared buffer first.
  __device__ static void init(int wg) {
    if constexpr (kSharedStaging)
      if (wg == 1) ptx::named_barrier_arrive(uint32_t(NamedBarrier::kStagingWG0), 256);
  }

  __device__ static void finish(const Params&, int tid) {
    if (tid == 0) ptx::tma_store_wait_all();
  }
};

}  // namespace xstage::attention::sm90
