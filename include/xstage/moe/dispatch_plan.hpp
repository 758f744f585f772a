#pragma once
// Host owner of the dispatch/combine tables of one MoE layer call (the math is in dispatch_layout.hpp):
// built from the global top-k of every rank, it answers, for every routed row, where it goes
// (source side) and, for every received row of every rank, where its result goes back (combine), and
// builds each rank's sched::MoeLayoutStorage. Every rank computes the same tables from the same
// inputs; a kernel gets DispatchLayout::rebased onto device copies of counts / src_base / row_offset.
#include <cstdint>
#include <vector>

#include "xstage/moe/dispatch_layout.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/sched/moe_layout.hpp"

namespace xstage::moe {

class DispatchPlan {
 public:
  // index: [P][T][k] global expert ids (validated: UsageError naming rank, token, slot, value). combine_map: also
  // build the combine map (every received row's source; the references and the unfused path read it, the fused
  // kernel does not: without it a layer call's host plan costs about half).
  DispatchPlan(std::vector<std::int32_t> index, int tokens_per_rank, int topk, ExpertPlacement place, int b_m,
               bool combine_map = true);
  DispatchPlan(const Routing& r, ExpertPlacement place, int b_m)
      : DispatchPlan(r.index, r.tokens_per_rank, r.topk, place, b_m) {}
  DispatchPlan(const DispatchPlan& o);
  DispatchPlan(DispatchPlan&& o) noexcept;
  DispatchPlan& operator=(const DispatchPlan&) = delete;

  const DispatchLayout& view() const { return view_; }
  const ExpertPlacement& placement() const { return view_.place; }
  int world() const { return view_.place.world; }
  int tokens_per_rank() const { return view_.tokens_per_rank; }
  int topk() const { return view_.topk; }
  int b_m() const { return view_.b_m; }

  // Source side.
  int expert(int src, int token, int slot) const { return index_[at(src, token, slot)]; }
  int pos_in_src(int src, int token, int slot) const { return pos_[at(src, token, slot)]; }
  DispatchDest dest(int src, int token, int slot) const {
    return view_.dest(src, expert(src, token, slot), pos_in_src(src, token, slot));
  }

  // Destination side.
  std::vector<int> local_tokens(int rank) const;  // routed rows per local expert of `rank`
  int recv_rows(int rank) const { return view_.recv_rows(rank); }
  // recv_rows(rank) entries: the (source rank, token, slot) of each received row; padding rows -1. UsageError when the
  // plan was built without it.
  const std::vector<CombineSrc>& combine_map(int rank) const;
  // Every routed row's global expert and its ordinal among its source's rows to that expert, [P][T][k] (the fused
  // kernel's index and pos tables are slices of these).
  const std::vector<std::int32_t>& index() const { return index_; }
  const std::vector<int>& positions() const { return pos_; }
  // Rank's tile layout for the MoE schedulers (its O_e equal row_offset[rank][*]).
  sched::MoeLayoutStorage layout(int rank, int l1_ntiles, int l2_ntiles) const {
    return sched::MoeLayoutStorage(local_tokens(rank), b_m(), l1_ntiles, l2_ntiles);
  }

  // The tables behind view(), for device copies.
  const std::vector<int>& counts() const { return counts_; }
  const std::vector<int>& src_base() const { return src_base_; }
  const std::vector<int>& row_offsets() const { return row_offset_; }

 private:
  std::size_t at(int src, int token, int slot) const {
    return (std::size_t(src) * view_.tokens_per_rank + token) * view_.topk + slot;
  }
  std::vector<std::int32_t> index_;
  std::vector<int> pos_;
  std::vector<int> counts_, src_base_, row_offset_;
  std::vector<std::vector<CombineSrc>> combine_;
  bool has_combine_ = false;
  DispatchLayout view_;
};

}  // namespace xstage::moe
