#pragma once
// Thread-block clusters, sm_90: the CTA's rank in its cluster, a whole-cluster barrier, mbarrier operations on
// a peer CTA's shared memory, and TMA loads multicast into every CTA of a mask. Used by the fused MoE kernel's
// CTA pairs (docs/MOE.md, "CTA pairs"), which share the A operand of a tile.
#include <cuda.h>

#include <cstdint>

#include "xstage/ptx/tma.cuh"

namespace xstage::ptx {

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// This CTA's cluster index along x and the number of clusters along x (a 1-d grid of clusters).
__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t nclusters_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster arrives (release) and waits (acquire). Not .aligned: callers may
// arrive from divergent code; no thread of the cluster may have exited before it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// Arrive on the mbarrier at the same shared-memory offset as `bar` in CTA `cta` of this cluster (this CTA
// included). Release at CTA scope (the PTX default, as CUTLASS's cluster barriers): what it orders for the
// MoE pipeline is the arriving warp's completed wgmma reads of the stage, nothing written through the generic
// proxy. With `.release.cluster` instead, the fused MoE kernel's pairs ran 1.45-1.58x slower on the H200
// (results/moe/runs/s20, calls 2 and 3).
__device__ __forceinline__ void mbar_arrive_remote(uint64_t* bar, uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
}

// 2-d tiled TMA load of one box into the same shared-memory offset of every CTA in `cta_mask`; each
// destination's mbarrier at `bar`'s offset counts the box's bytes.
__device__ __forceinline__ void tma_load_2d_multicast(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1,
                                                      uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

}  // namespace xstage::ptx
