#pragma once
// The dispatch plan on the device (docs/MOE.md, "The plan on the device"): the tables the fused kernel reads --
// counts [P][E], src_base [P][E], row_offset [P][E/P + 1], tokens per local expert, and per local rank the index and
// pos tables [T][k] -- computed from every rank's top-k indices in device memory, with the counts exchanged between
// the ranks by peer stores and one signal per source, so a layer call needs nothing of the routing on the host and no
// host synchronisation. Its tables are the host DispatchPlan's, value for value (the GPU tests compare them), so the
// fused kernel runs the same tiles and writes the same bits either way.
//
// Per call, on the layer's stream (moe_layer.cpp's prepare_moe_layer), O(T k + chunks E) work per rank, in chunks of
// kPlanChunkTokens tokens:
//   1. plan_hist (CTA per chunk, thread per token): every token's k indices in [0, E) and distinct (the first bad
//      entry, smallest t * k + j, of a local rank is kept in its MoePlanRecord), and the chunk's count per expert.
//   2. plan_scan (thread per expert): each chunk's base per expert (exclusive prefix over the chunks) and the rank's
//      count per expert, stored into every rank's counts table at row `source` (peer stores); the rank's last CTA
//      raises every rank's plan counter (SignalSet slot kSlotPlan). A rank whose routing is invalid is planned as the
//      stand-in routing (t * k + j) mod E (valid, distinct per token): the layer still runs, the ranks stay in step,
//      and its weighted sum writes nothing (combine_kernel reads the record); MoeWorkspace::check names the bad entry.
//   3. plan_ordinals (warp per chunk): walks the chunk's (t, j) entries in order, 32 at a time, and gives each its
//      ordinal among the rank's entries to its expert (the chunk's base plus a match within the warp): the index and
//      pos tables, in the host plan's (source, token, slot) order.
//   4, 5. plan_tables: waits until every source's counts are in (acquire, the team's timeout), then src_base,
//      row_offset and the local experts' tokens from the gathered counts.
#include <cuda_runtime.h>

#include <cstdint>

#include "xstage/runtime/device_error.hpp"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::moe_kernel {

// MoePlanRecord::first_bad when the routing is valid (cudaMemsetAsync with 0x7F before each plan; larger than any
// flat index t * k + j, which check_moe_shape keeps below 2^31).
inline constexpr int kPlanClean = 0x7F7F7F7F;

// Tokens per chunk of plan_hist and plan_ordinals.
inline constexpr int kPlanChunkTokens = 256;

// One local rank's routing as this call's plan found it (device memory, [local ranks]; set to 0x7F bytes before each
// plan).
struct MoePlanRecord {
  int first_bad;  // kPlanClean, or the smallest t * k + j of an invalid entry
  int done;       // plan_scan's CTAs that are done, counted from kPlanClean
  int pad[2];
};

// The first invalid routing seen since the last MoeWorkspace::check (device memory; first failure wins).
struct MoePlanError {
  int code;      // 0 none, 1 out of range, 2 repeats an earlier slot of the token
  int rank, token, slot, value;
  int repeats;   // code 2: the earlier slot holding the same expert
};

struct PlanParams {
  runtime::TeamView view;
  int tokens[runtime::kMaxRanks] = {};  // this call's tokens of local rank g
  int topk = 0, experts = 0, b_m = 0;
  int chunks = 0;  // ceil(T / kPlanChunkTokens) for the workspace's T: the grid; a rank's chunks past its tokens count none
  const int32_t* index[runtime::kMaxRanks] = {};  // the caller's [T][k] of local rank g (device)
  int32_t* idx_out[runtime::kMaxRanks] = {};      // the kernel's index table of local rank g, [T][k]
  int32_t* pos_out[runtime::kMaxRanks] = {};      // its pos table, [T][k]
  runtime::PeerTable counts;                      // symmetric [P][E + 1]: row s = source s's counts, [E] its flag
  runtime::PeerTable signal;                      // the workspace's SignalSet
  int signal_slot = 0;
  uint32_t* plan_epoch = nullptr;  // plan signals per source so far (device; plan_hist adds this call's)
  uint64_t timeout_ns = 0;
  runtime::DeviceError* team_err = nullptr;  // a timed-out wait is recorded here (the team's record)
  int32_t* t_counts = nullptr;  // tables: [P][E]
  int32_t* t_base = nullptr;    // [P][E]
  int32_t* t_off = nullptr;     // [P][E/P + 1]
  int32_t* t_tok = nullptr;     // [local ranks][E/P]
  int32_t* hist = nullptr;       // scratch [local ranks][chunks][E]: a chunk's counts, then its bases
  MoePlanRecord* rec = nullptr;  // [local ranks]
  MoePlanError* err = nullptr;
};

// Steps 1-3, and steps 4-5 (the wait for every source's counts, then the tables).
cudaError_t launch_plan_counts(const PlanParams& pp, cudaStream_t stream);
cudaError_t launch_plan_tables(const PlanParams& pp, cudaStream_t stream);

// The padding rows a launch's tiles load (moe::loaded_padding_rows), to be zeroed in its prologue
// (MoeLayerParams::zero_padding): the local ranks' receive buffers, back to back, and the call's tables.
struct PaddingZero {
  int ranks = 0;            // local ranks; 0: nothing to zero
  int experts = 0;          // local experts per rank (E / P)
  int rows_cap = 0;         // receive rows per rank
  int row_bytes = 0;        // bytes per receive row (a multiple of 16)
  int kblocks = 0;          // row scales per row (H / 128; 0: a bf16 workspace, no scales)
  int b_m = 0;              // rows per row tile
  bool whole = false;       // every tile loads all b_m rows (bf16)
  uint8_t* x = nullptr;     // [ranks][rows_cap][row_bytes]
  float* sa = nullptr;      // [ranks][kblocks][rows_cap]
  const int32_t* row_offset = nullptr;  // local rank g's row_offset[E/P + 1] at row_offset + g * (experts + 1)
  const int32_t* tokens = nullptr;      // local rank g's tokens per local expert at tokens + g * experts
};

// A launch's prologue on its stream, before the fused kernel: row_ready's `words` counters to zero, and this launch's
// signals added to the epochs its waits read (epochs[kSlotDispatch] and [kSlotCombine] += ctas: one signal per CTA and
// source). The epochs live on the device so that a captured call replays with fresh targets (MoeWorkspace). With
// pz.ranks > 0 also the padding rows of this call's tiles to zero (codes and row scales; a padding row is never a
// row this call dispatches, so peers' dispatch stores into the same buffers do not race with it).
cudaError_t launch_call_prologue(uint32_t* row_ready, size_t words, uint32_t* epochs, uint32_t ctas,
                                 const PaddingZero& pz, cudaStream_t stream);

// What MoeWorkspace::fill_receive writes: kinds of moe_kernel::MoeReceiveFill (moe_layer.hpp).
// Random finite values, seeded: FP8 e4m3 codes (never the NaN codes 0x7F / 0xFF), bf16 values in (-4, 4), or fp32
// scales in [1/448, 2/448) (`elem` 1, 2 and 4; n elements).
cudaError_t launch_fill_random(void* p, size_t n, int elem, uint32_t seed, cudaStream_t stream);

}  // namespace xstage::moe_kernel
