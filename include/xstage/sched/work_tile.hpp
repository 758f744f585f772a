#pragma once
// The one tile-scheduler interface of xstage's persistent kernels (attention and MoE alike; the
// FlashAttention-3 shape). A kernel is templated on a scheduler type Sched and only ever writes:
//
//   const Sched sched(params, blockIdx.x);                 // immutable; params built on the host
//   for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) use(w.tile);
//   launch with Sched::grid_size(params) CTAs             // never more than the params allow
//
// The cursor state travels in WorkTileInfo, so producer and consumer warps of one CTA each replay the
// same sequence without talking to each other. Every scheduler is pure __host__ __device__ index math
// (XSTAGE_HD) so the CPU tests walk it exhaustively.
#include "xstage/common/hd.hpp"

namespace xstage::sched {

template <class Tile>
struct WorkTileInfo {
  Tile tile;               // what to compute next; Tile has `bool is_valid`
  int cursor[2] = {0, 0};  // the scheduler's position after this tile (its meaning is the scheduler's)
  XSTAGE_HD bool is_valid() const { return tile.is_valid; }
};

}  // namespace xstage::sched
