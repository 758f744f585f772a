// Host tables of the dispatch/combine layout (include/xstage/moe/dispatch_plan.hpp).
#include "xstage/moe/dispatch_plan.hpp"

#include <utility>

#include "xstage/common/error.hpp"

namespace xstage::moe {

DispatchPlan::DispatchPlan(std::vector<std::int32_t> index, int tokens_per_rank, int topk, ExpertPlacement place,
                           int b_m, bool combine_map)
    : index_(std::move(index)) {
  place = make_placement(place.experts, place.world);  // re-checks E % P
  const int P = place.world, E = place.experts, pr = place.per_rank();
  XSTAGE_REQUIRE(b_m >= 1, "dispatch layout: b_m must be >= 1, got ", b_m);
  XSTAGE_REQUIRE(tokens_per_rank >= 0, "dispatch layout: tokens per rank must be >= 0, got ", tokens_per_rank);
  XSTAGE_REQUIRE(topk >= 1 && topk <= E, "dispatch layout: top-k must be in [1, ", E, "], got ", topk);
  const std::size_t n = std::size_t(P) * tokens_per_rank * topk;
  XSTAGE_REQUIRE(index_.size() == n, "dispatch layout: expected ", n, " top-k indices (", P, " ranks x ", tokens_per_rank,
                 " tokens x top-", topk, "), got ", index_.size());
  for (int s = 0; s < P; ++s)
    validate_topk(index_.data() + std::size_t(s) * tokens_per_rank * topk, tokens_per_rank, topk, E, s);
  XSTAGE_REQUIRE(max_recv_rows(P, tokens_per_rank, topk, pr, b_m) <= (1LL << 30),
                 "dispatch layout: a rank could receive up to ", max_recv_rows(P, tokens_per_rank, topk, pr, b_m),
                 " rows, more than 2^30");

  view_.place = place;
  view_.tokens_per_rank = tokens_per_rank;  // at() needs these two from here on
  view_.topk = topk;
  view_.b_m = b_m;

  // Source side: counts[s][e] and each routed row's ordinal pos among its source's rows to e.
  counts_.assign(std::size_t(P) * E, 0);
  pos_.assign(n, 0);
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < tokens_per_rank; ++t)
      for (int j = 0; j < topk; ++j) {
        const std::size_t i = at(s, t, j);
        pos_[i] = counts_[std::size_t(s) * E + index_[i]]++;
      }
  // Exclusive prefix over sources.
  src_base_.assign(std::size_t(P) * E, 0);
  for (int e = 0; e < E; ++e)
    for (int s = 1; s < P; ++s)
      src_base_[std::size_t(s) * E + e] = src_base_[std::size_t(s - 1) * E + e] + counts_[std::size_t(s - 1) * E + e];
  // Per destination: padded row offsets of its local experts (in b_m rows), the MoeLayout's O_e.
  row_offset_.assign(std::size_t(P) * (pr + 1), 0);
  for (int d = 0; d < P; ++d)
    for (int le = 0; le < pr; ++le) {
      const int e = place.global_of(d, le);
      const int tokens = src_base_[std::size_t(P - 1) * E + e] + counts_[std::size_t(P - 1) * E + e];
      row_offset_[std::size_t(d) * (pr + 1) + le + 1] = row_offset_[std::size_t(d) * (pr + 1) + le] + (tokens + b_m - 1) / b_m;
    }

  view_.counts = counts_.data();
  view_.src_base = src_base_.data();
  view_.row_offset = row_offset_.data();

  // Combine map: the inverse, filled from the forward direction (the tests check it against locate()).
  if (!combine_map) return;
  has_combine_ = true;
  combine_.resize(P);
  for (int d = 0; d < P; ++d) combine_[d].assign(std::size_t(view_.recv_rows(d)), CombineSrc{});
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < tokens_per_rank; ++t)
      for (int j = 0; j < topk; ++j) {
        const DispatchDest d = dest(s, t, j);
        CombineSrc& c = combine_[d.rank][std::size_t(d.recv_row)];
        XSTAGE_CHECK(c.src_rank < 0, "dispatch layout: receive row ", d.recv_row, " of rank ", d.rank, " filled twice");
        c = CombineSrc{s, t, j};
      }
}

DispatchPlan::DispatchPlan(const DispatchPlan& o)
    : index_(o.index_),
      pos_(o.pos_),
      counts_(o.counts_),
      src_base_(o.src_base_),
      row_offset_(o.row_offset_),
      combine_(o.combine_),
      has_combine_(o.has_combine_),
      view_(o.view_.rebased(counts_.data(), src_base_.data(), row_offset_.data())) {}

// A moved vector keeps its buffer, so the view's pointers stay valid; rebased anyway, as the copy does.
DispatchPlan::DispatchPlan(DispatchPlan&& o) noexcept
    : index_(std::move(o.index_)),
      pos_(std::move(o.pos_)),
      counts_(std::move(o.counts_)),
      src_base_(std::move(o.src_base_)),
      row_offset_(std::move(o.row_offset_)),
      combine_(std::move(o.combine_)),
      has_combine_(o.has_combine_),
      view_(o.view_.rebased(counts_.data(), src_base_.data(), row_offset_.data())) {}

const std::vector<CombineSrc>& DispatchPlan::combine_map(int rank) const {
  XSTAGE_REQUIRE(has_combine_, "dispatch layout: this plan was built without its combine map (combine_map = false)");
  XSTAGE_REQUIRE(rank >= 0 && rank < world(), "dispatch layout: rank ", rank, " is outside [0, ", world(), ")");
  return combine_[std::size_t(rank)];
}

std::vector<int> DispatchPlan::local_tokens(int rank) const {
  XSTAGE_REQUIRE(rank >= 0 && rank < world(), "dispatch layout: rank ", rank, " is outside [0, ", world(), ")");
  std::vector<int> out(placement().per_rank());
  for (int le = 0; le < placement().per_rank(); ++le) out[le] = view_.expert_tokens(placement().global_of(rank, le));
  return out;
}

}  // namespace xstage::moe
