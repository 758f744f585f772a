#pragma once
// Expert-parallel placement and the dispatch/combine index math of the MoE layer (issue 11), pure
// __host__ __device__ C++17 (XSTAGE_HD, no STL, no allocation) so kernels and the CPU tests share it.
//
// Placement: E routed experts over P ranks, E / P per rank; expert e lives on rank e / (E/P) as local
// expert e mod (E/P) (make_placement refuses E % P != 0).
//
// Dispatch: every (source rank s, token t, slot j) with expert e = topk[s][t][j] is one routed row; it
// goes to rank d = rank_of(e), local expert le = local_of(e). Rows of one expert are ordered by source
// rank, then token, then slot (within one token the experts are distinct, so per expert this is just
// (s, t) order), which every rank can compute from two small tables, no per-token exchange:
//
//   counts[s][e]   = routed rows of source s to expert e                (the only thing ranks exchange)
//   src_base[s][e] = sum_{s' < s} counts[s'][e]                          (exclusive prefix over sources)
//   pos            = #{(t', j') before (t, j) on source s with expert e} (the source's own prefix)
//   row_in_expert  = src_base[s][e] + pos                                (row in e's contiguous block)
//
// The receive buffer of rank d holds its local experts' blocks one after the other, each padded to
// whole b_m-row tiles, exactly the rows of sched::MoeLayout (row_offset[d][le] = O_le in b_m rows):
//
//   recv_row = row_offset[d][le] * b_m + row_in_expert,  rows of d: row_offset[d][E/P] * b_m.
//
// Combine is the inverse: received row -> (source rank, token, slot), where the Linear-2 epilogue
// stores the row's result (into source rank s's combine buffer, entry (t, j)). DispatchLayout::locate
// recovers (local expert, row_in_expert, s, pos) from a row by binary search; the token itself is the
// pos-th token of s routed to e, which needs a table (host: DispatchPlan::combine_map; a kernel ships
// (t, j) with the row at dispatch time). A token with two experts on one rank is sent once per slot.
#include "xstage/common/hd.hpp"

#ifndef __CUDA_ARCH__
#include "xstage/common/error.hpp"
#endif

namespace xstage::moe {

struct ExpertPlacement {
  int experts = 0;  // E, routed experts over all ranks
  int world = 1;    // P

  XSTAGE_HD int per_rank() const { return experts / world; }
  XSTAGE_HD int rank_of(int e) const { return e / per_rank(); }
  XSTAGE_HD int local_of(int e) const { return e - rank_of(e) * per_rank(); }
  XSTAGE_HD int global_of(int rank, int local) const { return rank * per_rank() + local; }
};

#ifndef __CUDA_ARCH__
// UsageError unless 1 <= P <= E and E % P == 0.
inline ExpertPlacement make_placement(int experts, int world) {
  XSTAGE_REQUIRE(world >= 1, "expert placement: world size must be >= 1, got ", world);
  XSTAGE_REQUIRE(experts >= 1, "expert placement: number of experts must be >= 1, got ", experts);
  XSTAGE_REQUIRE(experts % world == 0, "expert placement: ", experts, " experts cannot be split evenly over ", world,
                 " ranks (E % P = ", experts % world, "; expert parallelism needs E to be a multiple of P)");
  return ExpertPlacement{experts, world};
}
#endif

// Where one routed row (source rank, token, slot) goes.
struct DispatchDest {
  int rank = -1;           // destination rank d
  int local_expert = -1;   // le on d
  int row_in_expert = -1;  // row in the expert's contiguous block (0 .. tokens of the expert - 1)
  int recv_row = -1;       // row in d's receive buffer (padded expert blocks)
};

// Where a received row's result goes back to (combine). Padding rows hold -1 everywhere.
struct CombineSrc {
  int src_rank = -1;
  int token = -1;
  int slot = -1;
};

// Upper bound of the receive rows any rank can need, for symmetric buffers sized before routing is
// known: at most T * min(k, E/P) routed rows from each of the P sources (a token's k experts are
// distinct), plus at most b_m - 1 padding rows per local expert.
XSTAGE_HD inline long long max_recv_rows(int world, int tokens_per_rank, int topk, int experts_per_rank, int b_m) {
  const long long per_token = topk < experts_per_rank ? topk : experts_per_rank;
  return (long long)world * tokens_per_rank * per_token + (long long)experts_per_rank * (b_m - 1);
}

// The padding rows of an expert's block that its last row tile loads from the receive buffer, in rows of the block:
// codes [begin, end), row scales [begin, scale_end); empty where the expert's `tokens` fill whole b_m-row tiles (or
// are 0). The fused kernel's producer loads a tile's A codes as: all b_m rows where `whole` (bf16 tiles), else
// b_m / 2 rows for a half tile (the last tile holds at most b_m / 2 tokens) and b_m for a full one (moe_kernel.cuh,
// `a_rows`; a_trim loads fewer rows still, and the stage keeps what it held in the others), and the row scales as one
// b_m-row box per K block for any tile. These rows only feed padding outputs, which nothing stores, so what they hold
// never reaches a result; it does reach the tensor cores (MoeLayerParams::zero_padding writes zeros there). A W4A8
// quarter tile (at most b_m / 4 tokens) loads the half tile's b_m / 2 rows but multiplies only its first b_m / 4 (N =
// 32 tokens): the rule still names all loaded rows, so zero_padding also zeroes rows no tensor core reads there.
struct PaddingRows {
  int begin = 0, end = 0, scale_end = 0;
};
XSTAGE_HD inline PaddingRows loaded_padding_rows(int tokens, int b_m, bool whole) {
  const int tail = tokens > 0 ? tokens % b_m : 0;
  if (tail == 0) return PaddingRows{tokens, tokens, tokens};
  const int last = tokens - tail;  // first row of the last row tile
  return PaddingRows{tokens, last + (whole || tail > b_m / 2 ? b_m : b_m / 2), last + b_m};
}

// A trivially copyable view of the three tables (a kernel argument once rebased onto device copies).
struct DispatchLayout {
  ExpertPlacement place;
  int tokens_per_rank = 0;
  int topk = 0;
  int b_m = 1;
  const int* counts = nullptr;      // [P][E]
  const int* src_base = nullptr;    // [P][E]
  const int* row_offset = nullptr;  // [P][E/P + 1], in b_m rows; row_offset[d][0] = 0

  XSTAGE_HD DispatchLayout rebased(const int* counts_copy, const int* src_base_copy, const int* row_offset_copy) const {
    DispatchLayout l = *this;
    l.counts = counts_copy;
    l.src_base = src_base_copy;
    l.row_offset = row_offset_copy;
    return l;
  }

  XSTAGE_HD int count(int src, int e) const { return counts[src * place.experts + e]; }
  XSTAGE_HD int base(int src, int e) const { return src_base[src * place.experts + e]; }
  // Routed rows of expert e over all sources.
  XSTAGE_HD int expert_tokens(int e) const { return base(place.world - 1, e) + count(place.world - 1, e); }
  XSTAGE_HD int offset(int rank, int local) const { return row_offset[rank * (place.per_rank() + 1) + local]; }
  // Rows of rank d's receive buffer (padded), a multiple of b_m.
  XSTAGE_HD int recv_rows(int rank) const { return offset(rank, place.per_rank()) * b_m; }

  // The destination of the pos-th routed row of source `src` to expert e.
  XSTAGE_HD DispatchDest dest(int src, int e, int pos) const {
    DispatchDest d;
    d.rank = place.rank_of(e);
    d.local_expert = place.local_of(e);
    d.row_in_expert = base(src, e) + pos;
    d.recv_row = offset(d.rank, d.local_expert) * b_m + d.row_in_expert;
    return d;
  }

  // Inverse for a row of rank d: false for a padding row (or a row past the buffer); else the local
  // expert, the row in its block, the source rank and the source's ordinal pos (dest(src, e, pos)
  // gives `row` back). Two binary searches: over d's experts, then over sources.
  XSTAGE_HD bool locate(int rank, int row, int* local_expert, int* row_in_expert, int* src, int* pos) const {
    const int pr = place.per_rank();
    if (row < 0 || row >= recv_rows(rank)) return false;
    const int tile = row / b_m;
    int lo = 0, hi = pr - 1;  // largest le with offset(le) <= tile
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (offset(rank, mid) <= tile)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int e = place.global_of(rank, lo);
    const int r = row - offset(rank, lo) * b_m;
    if (r >= expert_tokens(e)) return false;  // padding at the end of the expert's last tile
    int s_lo = 0, s_hi = place.world - 1;     // largest s with base(s, e) <= r and count(s, e) > 0
    while (s_lo < s_hi) {
      const int mid = s_lo + (s_hi - s_lo + 1) / 2;
      if (base(mid, e) <= r)
        s_lo = mid;
      else
        s_hi = mid - 1;
    }
    // Sources with no rows to e share their base with the next source; the largest s with
    // base(s, e) <= r is the one whose range [base, base + count) holds r.
    *local_expert = lo;
    *row_in_expert = r;
    *src = s_lo;
    *pos = r - base(s_lo, e);
    return true;
  }
};

}  // namespace xstage::moe
