#pragma once
// The Ulysses all-to-all as SM stores through peer pointers (layout/ulysses.hpp), both directions:
//   kSeqToHead (pre-attention):  [b, seq_per_rank, H, d] of every source -> [b, S, H/P, d] on rank head / (H/P)
//   kHeadToSeq (post-attention, the Serial variant's): [b, S, H/P, d] -> [b, seq_per_rank, H, d] on rank row / spr
// One launch serves every local rank (emulated: all P; CTAs partitioned by rank). Each CTA copies 16-byte
// chunks grid-stride (consecutive threads write consecutive chunks of a row: coalesced stores), then, its
// stores performed (fence at system scope), raises counter (slot, source) on every destination by one:
// a receiver that has seen ctas_per_rank * epoch from every source holds the whole epoch's data.
#include <cuda_runtime.h>

#include <cstdint>

#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::ulysses {

enum class A2ADirection : int { kSeqToHead = 0, kHeadToSeq = 1 };

inline constexpr int kMaxTensors = 3;  // q, k, v in one launch

struct A2AArgs {
  runtime::TeamView view;
  int ctas_per_rank = 0;
  int batch = 0, seq_per_rank = 0, heads = 0, head_dim = 0;  // heads: all H (H / world per rank after)
  int elem_bytes = 2;
  A2ADirection direction = A2ADirection::kSeqToHead;
  int tensors = 0;
  const char* src[kMaxTensors][runtime::kMaxRanks] = {};  // [tensor][local rank g]: that rank's source
  runtime::PeerTable dst[kMaxTensors];                     // [tensor]: every rank's destination buffer
  runtime::PeerTable signal;                               // completion counters (SignalSet::table())
  int slot = 0;
};

// Launches the copy (grid = view.ranks * ctas_per_rank CTAs) on `stream`.
cudaError_t launch_a2a(const A2AArgs& a, cudaStream_t stream);

}  // namespace xstage::ulysses
