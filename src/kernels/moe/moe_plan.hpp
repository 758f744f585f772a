#pragma once
// The dispatch plan on the device (docs/MOE.md, "The plan on the device"): the tables the fused kernel reads --
// counts [P][E], src_base [P][E], row_offset [P][E/P + 1], tokens per local expert, and per local rank the index and
// pos tables [T][k] -- computed from every rank's top-k indices in device memory, with the counts exchanged between
// the ranks by peer stores and one signal per source, so a layer call needs nothing of the routing on the host and no
// host synchronisation. Its tables are the host DispatchPlan's, value for value (the GPU tests compare them), so the
// fused kernel runs the same tiles and writes the same bits either way.
//
// Per call, on the layer's stream (moe_layer.cpp's prepare_moe_layer):
//   1. plan_validate: every token's k indices in [0, E) and distinct; the first bad entry (smallest t * k + j) of a
//      local rank is kept in its MoePlanRecord.
//   2. plan_count: one CTA per (global expert e, local rank): walks the rank's (t, j) entries in order, ballots the
//      entries routed to e, writes their index and ordinal (pos), and stores the count into every rank's counts
//      table at row `source` (peer stores). A rank whose routing is invalid is planned as the stand-in routing
//      (t * k + j) mod E (valid, distinct per token): the layer still runs, the ranks stay in step, and its weighted
//      sum writes nothing (combine_kernel reads the record); MoeWorkspace::check names the bad entry.
//   3. plan_signal: each local rank raises every rank's plan counter (SignalSet slot kSlotPlan).
//   4. SignalSet::wait(kSlotPlan): every source's counts are in.
//   5. plan_tables: src_base, row_offset and the local experts' tokens from the gathered counts.
#include <cuda_runtime.h>

#include <cstdint>

#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::moe_kernel {

// MoePlanRecord::first_bad when the routing is valid (cudaMemsetAsync with 0x7F before each plan; larger than any
// flat index t * k + j, which check_moe_shape keeps below 2^31).
inline constexpr int kPlanClean = 0x7F7F7F7F;

// One local rank's routing as this call's plan found it (device memory, [local ranks]).
struct MoePlanRecord {
  int first_bad;  // kPlanClean, or the smallest t * k + j of an invalid entry
  int pad[3];
};

// The first invalid routing seen since the last MoeWorkspace::check (device memory; first failure wins).
struct MoePlanError {
  int code;      // 0 none, 1 out of range, 2 repeats an earlier slot of the token
  int rank, token, slot, value;
  int repeats;   // code 2: the earlier slot holding the same expert
};

struct PlanParams {
  runtime::TeamView view;
  int tokens = 0, topk = 0, experts = 0, b_m = 0;
  const int32_t* index[runtime::kMaxRanks] = {};  // the caller's [T][k] of local rank g (device)
  int32_t* idx_out[runtime::kMaxRanks] = {};      // the kernel's index table of local rank g, [T][k]
  int32_t* pos_out[runtime::kMaxRanks] = {};      // its pos table, [T][k]
  runtime::PeerTable counts;                      // symmetric [P][E + 1]: row s = source s's counts, [E] its flag
  runtime::PeerTable signal;                      // the workspace's SignalSet
  int signal_slot = 0;
  int32_t* t_counts = nullptr;  // tables: [P][E]
  int32_t* t_base = nullptr;    // [P][E]
  int32_t* t_off = nullptr;     // [P][E/P + 1]
  int32_t* t_tok = nullptr;     // [local ranks][E/P]
  MoePlanRecord* rec = nullptr;  // [local ranks]
  MoePlanError* err = nullptr;
};

// Steps 1-3 (before the wait for every source's counts) and step 5 (after it).
cudaError_t launch_plan_counts(const PlanParams& pp, cudaStream_t stream);
cudaError_t launch_plan_tables(const PlanParams& pp, cudaStream_t stream);

}  // namespace xstage::moe_kernel
