#pragma once
// Row/tile geometry of one rank's local experts after dispatch (SPEC §5), shared by every MoE tile
// scheduler. A row is one b_m-high block of tokens of one expert; rows of expert e are the contiguous
// range [O_e, O_{e+1}) of the global row index p. Linear-1 (hidden -> 2*h_inter, gate/up) has
// l1_ntiles = 2*h_inter/b_n N-tiles per row; Linear-2 (h_inter -> hidden) has l2_ntiles = hidden/b_n.
// An L2 tile of row p reduces over the whole intermediate dimension, so it depends on ALL L1 tiles of
// row p (and on nothing else).
//
// MoeLayout is a trivially copyable view (it can be a kernel argument); row_offset points at
// num_experts + 1 prefix sums and tokens at num_experts token counts, in host or device memory (a
// kernel gets a view rebased onto device copies of the two arrays: MoeLayout::rebased).
// MoeLayoutStorage (host only) owns the host arrays.
//
// Row order: the schedulers walk *positions* q = 0 .. rows-1 and ask tile(kind, q, n) for the tile there. By
// default position q is row q (experts in index order); a layout may carry a permutation row_order[q] (rows() entries,
// same memory as the other arrays) so that the walk visits rows in another order, e.g. spread_row_order below. Every
// dependency the schedulers reason about (an L2 tile after the L1 tiles of its row) is per row, and both kinds of
// a row sit at the same position, so the ordering guarantees of docs/SCHEDULERS.md hold in position space.
#include "xstage/common/hd.hpp"

#ifndef __CUDA_ARCH__
#include <string>
#include <vector>

#include "xstage/common/error.hpp"
#endif

namespace xstage::sched {

enum class MoeTileKind : int { L1 = 0, L2 = 1 };

// One scheduled tile: what an MMA role computes next.
struct MoeTile {
  bool is_valid = false;
  MoeTileKind kind = MoeTileKind::L1;
  int expert = -1;  // local expert e(p)
  int m = -1;       // row within the expert, p - O_e (in units of b_m)
  int n = -1;       // N-tile index within the row, 0 <= n < ntiles(kind)
  int row = -1;     // global row p
};

struct MoeLayout {
  int num_experts = 0;
  const int* row_offset = nullptr;  // O_0 = 0, ..., O_E = rows; non-decreasing (empty experts repeat)
  int l1_ntiles = 0;                // N-tiles of one Linear-1 row (2 h_inter / b_n)
  int l2_ntiles = 0;                // N-tiles of one Linear-2 row (hidden / b_n)
  const int* tokens = nullptr;      // tokens routed to each local expert (num_experts entries)
  int b_m = 0;                      // token rows per tile row
  const int* row_order = nullptr;   // position -> row (rows() entries); null: position q is row q

  // The same layout over other copies of the arrays (e.g. device memory for a kernel); the row order too (null
  // without one: a host pointer must never reach a kernel).
  XSTAGE_HD MoeLayout rebased(const int* row_offset_copy, const int* tokens_copy,
                              const int* row_order_copy = nullptr) const {
    MoeLayout l = *this;
    l.row_offset = row_offset_copy;
    l.tokens = tokens_copy;
    l.row_order = row_order_copy;
    return l;
  }

  // The row the walk visits at position q.
  XSTAGE_HD int row_at(int q) const { return row_order ? row_order[q] : q; }

  XSTAGE_HD int rows() const { return row_offset[num_experts]; }
  XSTAGE_HD int ntiles(MoeTileKind k) const { return k == MoeTileKind::L1 ? l1_ntiles : l2_ntiles; }

  // e(p): the expert whose row range holds p, i.e. the largest e with O_e <= p (empty experts have an
  // empty range, so the largest such e is the one with O_{e+1} > p). Requires 0 <= p < rows().
  XSTAGE_HD int expert_of_row(int p) const {
    int lo = 0, hi = num_experts - 1;  // invariant: O_lo <= p; answer in [lo, hi]
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (row_offset[mid] <= p)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }

  // The tile of `kind` at position q (row p = row_at(q)), N-tile n, with expert and in-expert row filled in.
  XSTAGE_HD MoeTile tile(MoeTileKind kind, int q, int n) const {
    const int p = row_at(q);
    MoeTile t;
    t.is_valid = true;
    t.kind = kind;
    t.row = p;
    t.expert = expert_of_row(p);
    t.m = p - row_offset[t.expert];
    t.n = n;
    return t;
  }

  // Tokens actually present in row p (the last row of an expert may be partial). Requires 0 <= p < rows().
  XSTAGE_HD int tokens_in_row(int p) const {
    const int e = expert_of_row(p);
    const int left = tokens[e] - (p - row_offset[e]) * b_m;
    return left < b_m ? left : b_m;
  }
};

#ifndef __CUDA_ARCH__
// Host-side owner of a layout: built from per-expert token counts after dispatch.
class MoeLayoutStorage {
 public:
  // tokens[e]: tokens routed to local expert e (>= 0); b_m: rows per tile; l1/l2_ntiles: N-tiles per row.
  MoeLayoutStorage(std::vector<int> tokens, int b_m, int l1_ntiles, int l2_ntiles)
      : tokens_(std::move(tokens)), b_m_(b_m) {
    XSTAGE_REQUIRE(!tokens_.empty(), "MoE layout: need at least one local expert");
    XSTAGE_REQUIRE(b_m > 0, "MoE layout: b_m must be positive, got ", b_m);
    XSTAGE_REQUIRE(l1_ntiles > 0, "MoE layout: Linear-1 N-tiles per row must be positive, got ", l1_ntiles);
    XSTAGE_REQUIRE(l2_ntiles > 0, "MoE layout: Linear-2 N-tiles per row must be positive, got ", l2_ntiles);
    offsets_.assign(tokens_.size() + 1, 0);
    for (size_t e = 0; e < tokens_.size(); ++e) {
      XSTAGE_REQUIRE(tokens_[e] >= 0, "MoE layout: expert ", e, " has a negative token count ", tokens_[e]);
      const long long rows = (static_cast<long long>(tokens_[e]) + b_m - 1) / b_m;
      const long long next = offsets_[e] + rows;
      // Tile positions (up to rows * (l1 + l2) plus one stride) must fit in int on the device.
      XSTAGE_REQUIRE(next * (static_cast<long long>(l1_ntiles) + l2_ntiles) < (1LL << 30),
                     "MoE layout: too many tiles (", next, " rows)");
      offsets_[e + 1] = static_cast<int>(next);
    }
    view_.num_experts = static_cast<int>(tokens_.size());
    view_.row_offset = offsets_.data();
    view_.l1_ntiles = l1_ntiles;
    view_.l2_ntiles = l2_ntiles;
    view_.tokens = tokens_.data();
    view_.b_m = b_m;
  }
  MoeLayoutStorage(const MoeLayoutStorage& o)
      : tokens_(o.tokens_), offsets_(o.offsets_), order_(o.order_), b_m_(o.b_m_),
        view_(o.view_.rebased(offsets_.data(), tokens_.data(), order_.empty() ? nullptr : order_.data())) {}
  MoeLayoutStorage& operator=(const MoeLayoutStorage&) = delete;

  // Walk the rows in `order` (position -> row; a permutation of [0, rows)); empty: rows in index order.
  void set_row_order(std::vector<int> order) {
    if (!order.empty()) {
      XSTAGE_REQUIRE(order.size() == size_t(rows()), "MoE layout: a row order needs ", rows(), " entries, got ",
                     order.size());
      std::vector<char> hit(order.size(), 0);
      for (size_t q = 0; q < order.size(); ++q) {
        const int p = order[q];
        XSTAGE_REQUIRE(p >= 0 && p < rows() && !hit[size_t(p)], "MoE layout: row order entry ", q, " (row ", p,
                       ") is out of range [0, ", rows(), ") or repeats a row");
        hit[size_t(p)] = 1;
      }
    }
    order_ = std::move(order);
    view_.row_order = order_.empty() ? nullptr : order_.data();
  }
  const std::vector<int>& row_order() const { return order_; }

  const MoeLayout& view() const { return view_; }
  const std::vector<int>& row_offsets() const { return offsets_; }
  const std::vector<int>& tokens() const { return tokens_; }
  int b_m() const { return b_m_; }
  int rows() const { return view_.rows(); }
  int tokens_in_row(int p) const { return view_.tokens_in_row(p); }

 private:
  std::vector<int> tokens_;
  std::vector<int> offsets_;
  std::vector<int> order_;  // empty: index order
  int b_m_;
  MoeLayout view_;
};

// A row order for layouts where many experts hold a single short row (skewed routing): the rows of experts with one
// row of at most b_m / 2 tokens ("streamed" rows: their weights serve that row alone, so they stream from DRAM)
// are spread evenly between the other rows, which keep their order and stay in pairs (rows 2i, 2i + 1 of an expert
// adjacent: the fused MoE kernel's weight-sharing pairs compute them together). In index order those rows come in
// runs, between runs of a large expert's rows that need no DRAM at all, so the layer alternates between saturating
// the DRAM with few tensor cores busy and leaving it idle (docs/MOE-NOTEBOOK.md, "Session 29"). Returns the identity where
// there is nothing to spread (no streamed rows, or nothing else).
inline std::vector<int> spread_row_order(const MoeLayout& l) {
  std::vector<int> streamed, unit_row, unit_len;  // units: a pair (or an expert's odd last row) of the other rows
  for (int e = 0; e < l.num_experts; ++e) {
    const int first = l.row_offset[e], rows = l.row_offset[e + 1] - first;
    if (rows == 1 && l.tokens[e] <= l.b_m / 2) {
      streamed.push_back(first);
      continue;
    }
    for (int b = 0; b < rows; b += 2) {
      unit_row.push_back(first + b);
      unit_len.push_back(rows - b >= 2 ? 2 : 1);
    }
  }
  std::vector<int> order;
  order.reserve(size_t(l.rows()));
  const size_t S = streamed.size(), U = unit_row.size();
  if (S == 0 || U == 0) {
    for (int q = 0; q < l.rows(); ++q) order.push_back(q);
    return order;
  }
  size_t s = 0;
  for (size_t u = 0; u < U; ++u) {
    for (int i = 0; i < unit_len[u]; ++i) order.push_back(unit_row[u] + i);
    for (const size_t upto = (u + 1) * S / U; s < upto; ++s) order.push_back(streamed[s]);  // Bresenham
  }
  return order;
}
#endif

}  // namespace xstage::sched
