#pragma once
// Parameters of the fused MoE kernel and of the weighted-sum kernel, host- and device-visible (no device
// code here): moe_layer.cpp fills them, moe_launch.cu launches, moe_kernel.cuh reads them.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "moe_layer.hpp"
#include "xstage/moe/dispatch_layout.hpp"
#include "xstage/runtime/device_error.hpp"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"
#include "xstage/sched/moe_scheduler.hpp"

namespace xstage::moe_kernel {

// ---------------------------------------------------------------- configuration
// kInt4 = W4A8: the weights come from the per-call e4m3 copy of the int4 weights (int4_to_e4m3_kernel) and
// their scales are per (row, 128-group): loaded per column by TMA, promoted per column.
template <bool kInt4_>
struct ConfigT {
  static constexpr bool kInt4 = kInt4_;
  // W8A8: 4 stages of 48 KB in flight and one epilogue slot (the trace showed the mainloop waiting for data
  // with 3 stages); W4A8 needs 1 KB of column scales per stage, so 3 stages and two slots.
  static constexpr int kStages = kInt4 ? 3 : 4;
  static constexpr int kEpiSlots = kInt4 ? 2 : 1;                // epilogue staging slots
  static constexpr uint32_t kL2Pitch = kBlockN * 2;              // bf16 row; 16-byte chunks XOR-swizzled by row
  static constexpr uint32_t kStageBytes = kBlockM * kL2Pitch;    // 32 KB; an L1 tile uses 16 KB + 512 B
  static constexpr uint32_t kStageScales = kBlockM * kBlockN;    // byte offset of the L1 row scales
  static constexpr int kConsumerWGs = 2;
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  // 128 * producer + 256 * consumer = 384 * 168, what the launch allocates (setmaxnreg moves registers
  // within it; more would block the increase forever).
  static constexpr int kProducerRegs = 56, kConsumerRegs = 224;
  static constexpr uint32_t kABytes = kBlockM * kBlockK;         // 16 KB
  static constexpr uint32_t kBBytes = kBlockN * kBlockK;         // 16 KB per 128-row e4m3 B box
  static constexpr uint32_t kSaBytes = kBlockM * sizeof(float);  // 512 B
  static constexpr uint32_t kSbBytes = kInt4 ? kBlockN * sizeof(float) : 0;  // per-column weight scales per box
  static constexpr uint32_t kL1TxBytes = kABytes + 2 * (kBBytes + kSbBytes) + kSaBytes;  // gate + up boxes
  static constexpr uint32_t kL2TxBytes = kABytes + kBBytes + kSbBytes + kSaBytes;
  static_assert(kBlockK == 128 && kBlockM == 128 && kBlockN == 128, "one tile configuration");
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kThreads * 168, "register budget of one CTA");
};

inline constexpr int kSlotDispatch = 0, kSlotCombine = 1;  // completion-signal slots

// (source rank, token, slot) of a received row, written by the dispatch with the row.
struct RecvMeta {
  int src, token, slot, pad;
};

template <class Sched_>
struct KernelParams {
  using Sched = Sched_;
  CUtensorMap tma_x;   // recv_x of the local ranks: {H, ranks * rows_cap} u8, box {128, 128}, sw128
  CUtensorMap tma_sa;  // recv_sa: {rows_cap, ranks * H/128} f32, box {128, 1}
  CUtensorMap tma_w1;  // {H, experts * 2I} u8, box {128, 128}, sw128
  CUtensorMap tma_h;   // h: {I, ranks * rows_cap} u8, box {128, 128}, sw128
  CUtensorMap tma_hs;  // h_scale: {rows_cap, ranks * I/128} f32, box {128, 1}
  CUtensorMap tma_w2;  // {I, experts * H} u8, box {128, 128}, sw128
  // W4A8 only (tma_w1 / tma_w2 then map the workspace's e4m3 copy): the per-(row, 128-group) scales,
  // K-block-major: {2I, experts * H/128} and {H, experts * I/128} fp32, box {128, 1}.
  CUtensorMap tma_s1, tma_s2;
  runtime::TeamView view;
  int ctas_per_rank;
  int hidden, inter, topk, tokens, rows_cap;
  moe::DispatchLayout dl;  // tables in device memory
  typename Sched::Params sched[runtime::kMaxRanks];  // per local rank; layout rebased onto device tables
  const int32_t* topk_index[runtime::kMaxRanks];     // [T][k] of local rank g
  const int32_t* topk_pos[runtime::kMaxRanks];       // [T][k]: ordinal among the source's rows to that expert
  const uint8_t* x[runtime::kMaxRanks];
  const float* x_scale[runtime::kMaxRanks];
  runtime::PeerTable recv_x, recv_sa, recv_meta, combine, signal;
  uint8_t* h;             // local ranks' intermediate codes, [ranks][rows_cap][I]
  float* h_scale;         // [ranks][I/128][rows_cap]
  uint32_t* row_ready;    // [ranks][rows_cap / 128], zeroed before the launch
  const float* w1_scale;  // W8A8: [experts][2I/128][H/128] (W4A8: read through tma_s1)
  const float* w2_scale;  // W8A8: [experts][H/128][I/128] (W4A8: read through tma_s2)
  uint32_t dispatch_target;  // epoch * ctas_per_rank
  uint64_t timeout_ns;
  runtime::DeviceError* team_err;
  MoeDeviceError* err;
  // Per-tile trace (only read by the kTrace instantiation): ctas x trace_cap records of kTraceWords words.
  uint64_t* trace;
  int trace_cap;
};

// One traced tile (moe_layer.hpp's MoeTileTrace is the host view): word 0 the tile, then %globaltimer stamps
// (ns) and clock64 spans (cycles) of the MMA warpgroup 0 (thread 0) and of the tile's epilogue warp (lane 0).
inline constexpr int kTraceWords = 10;
enum TraceWord : int {
  kTrTile = 0,         // kind << 63 | expert << 40 | row << 16 | n
  kTrMmaStart = 1,     // ns: first full-barrier wait of the tile begins
  kTrMmaEnd = 2,       // ns: the mainloop is done (L1: and SwiGLU + row amax)
  kTrMmaCycles = 3,    // cycles between the two
  kTrSlotWait = 4,     // cycles the MMA side waited for a free staging slot
  kTrEpiStart = 5,     // ns: the epilogue warp has the slot (stage_full passed)
  kTrEpiRead = 6,      // cycles from the first store issued to bulk_wait_group_read: the sender-visible span T_RS
  kTrEpiDone = 7,      // cycles from the first store issued to bulk_wait_group 0 (L1 only; 0 for L2)
  kTrFirstWait = 8,    // cycles from the tile start until its first stage is full (producer waits, TMA latency)
  kTrFullWait = 9,     // cycles spent waiting on full barriers over all the tile's k blocks (data starvation)
};

// ---------------------------------------------------------------- the weighted sum
struct CombineParams {
  runtime::TeamView view;
  int tokens, topk, hidden;
  runtime::PeerTable combine;
  const float* weight[runtime::kMaxRanks];  // [T][k] of local rank g
  float* out[runtime::kMaxRanks];           // [T][H]
};

// Launches (moe_launch.cu): the fused kernel for both schedulers and both weight formats (cooperative,
// `grid` CTAs) and the weighted sum (`ranks` x `blocks` CTAs).
// trace: the instantiation with per-tile instrumentation (W8A8 only; compiled in only there).
cudaError_t launch_fused(const KernelParams<sched::MoeExpertWaveScheduler>& kp, bool int4, bool trace, int grid,
                         cudaStream_t stream);
cudaError_t launch_fused(const KernelParams<sched::MoeInterleavedScheduler>& kp, bool int4, bool trace, int grid,
                         cudaStream_t stream);
cudaError_t launch_combine(const CombineParams& cp, int blocks, int ranks, cudaStream_t stream);
// W4A8 pre-pass: `bytes` of int4 weights (a multiple of 16) -> 2 * bytes of e4m3 codes.
cudaError_t launch_int4_to_e4m3(const uint8_t* in, uint8_t* out, size_t bytes, cudaStream_t stream);

}  // namespace xstage::moe_kernel
