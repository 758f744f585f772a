#pragma once
// Parameters of the fused MoE kernel and of the weighted-sum kernel, host- and device-visible (no device
// code here): moe_layer.cpp fills them, moe_launch.cu launches, moe_kernel.cuh reads them.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "moe_layer.hpp"
#include "moe_plan.hpp"
#include "xstage/moe/dispatch_layout.hpp"
#include "xstage/runtime/device_error.hpp"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"
#include "xstage/sched/moe_scheduler.hpp"

namespace xstage::moe_kernel {

// ---------------------------------------------------------------- configuration
// One configuration per weight format (moe_layer.hpp's MoeWeightFormat):
//   kFp8  (W8A8): e4m3 A and B, 128-deep K blocks, per-block scale promotion;
//   kInt4 (W4A8): every tile computed transposed, the int4 weights in the register-fragment layout bulk-copied into
//                 the stage and expanded in registers as wgmma's A operand (e4m3 subnormals in units of 2^-9), the
//                 tokens the B operand (moe_kernel.cuh, rs_mainloop); the group scales per (row, 128-group) loaded
//                 per weight row by TMA, promoted per row, the tokens' scales per column;
//   kBf16 (reference runs): bf16 A and B, no scales. Its K block is 64 elements deep so that a row of a
//                 block is still 128 bytes = one 128 B swizzle row: every TMA box ({64 bf16, 128 rows} =
//                 16 KB), stage size, shared-memory offset and wgmma descriptor of the FP8 path is reused as
//                 is (bf16 wgmma m64n128k16: 4 k steps of 16 elements = 32 bytes per block, the FP8 path's
//                 4 steps of 32 e4m3). Without scales nothing has to be promoted per block, so the MMA
//                 warpgroups accumulate straight into the final accumulators (fp32 over the whole K) and keep
//                 one block's wgmma batch in flight, waiting only to release the previous block's stage.
// Pipeline stages and staging slots of W8A8 and bf16, and W4A8's stages (compile-time; a build may set them to compare
// variants, e.g. 3 stages with two slots, which the shared memory also holds; W4A8 with 3 stages: s47 call 4).
#ifndef XSTAGE_MOE_STAGES
#define XSTAGE_MOE_STAGES 4
#endif
#ifndef XSTAGE_MOE_INT4_STAGES
#define XSTAGE_MOE_INT4_STAGES 5
#endif
// W4A8 tiles of at most 32 tokens run N = 32 batches (1; 0: a half tile's N = 64, for A/B builds).
#ifndef XSTAGE_MOE_INT4_QUARTER
#define XSTAGE_MOE_INT4_QUARTER 1
#endif
inline constexpr bool kInt4Quarter = XSTAGE_MOE_INT4_QUARTER != 0;
#ifndef XSTAGE_MOE_EPI_SLOTS
#define XSTAGE_MOE_EPI_SLOTS 1
#endif
template <MoeWeightFormat kFormat_>
struct ConfigT {
  static constexpr MoeWeightFormat kFormat = kFormat_;
  static constexpr bool kInt4 = kFormat == MoeWeightFormat::kInt4;
  static constexpr bool kBf16 = kFormat == MoeWeightFormat::kBf16;
  static constexpr int kElemBytes = kBf16 ? 2 : 1;          // bytes of one activation / weight element
  static constexpr int kBlockKElems = kBlockK / kElemBytes;  // K elements per block: 128 (FP8) or 64 (bf16)
  // W8A8 and bf16: 4 stages of 48 KB in flight and one epilogue slot (the trace showed the mainloop waiting for
  // data with 3 stages); W4A8: a stage is 16 KB of int4 and the 16 KB token box in one 32 KB B buffer (which also
  // stages a borrowed Linear-2 block), so 5 stages beside the slot.
  static constexpr int kStages = kInt4 ? XSTAGE_MOE_INT4_STAGES : XSTAGE_MOE_STAGES;
  static constexpr int kEpiSlots = kInt4 ? 1 : XSTAGE_MOE_EPI_SLOTS;  // epilogue staging slots
  static constexpr uint32_t kL2Pitch = kBlockN * 2;              // bf16 row; 16-byte chunks XOR-swizzled by row
  static constexpr uint32_t kStageBytes = kBlockM * kL2Pitch;    // 32 KB; an FP8 L1 tile uses 16 KB + 512 B
  static constexpr uint32_t kStageScales = kBlockM * kBlockN;    // byte offset of the FP8 L1 row scales
  // bf16 L1 tile: h [128 rows][128 columns] bf16 = two TMA boxes {64 columns, 128 rows} in the 128 B swizzle,
  // the second (columns 64..127) at this offset; the tile fills the 32 KB slot.
  static constexpr uint32_t kHPanelBytes = kBlockM * 128;
  static constexpr int kConsumerWGs = 2;
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  // 128 * producer + 256 * consumer = 384 * 168, what the launch allocates (setmaxnreg moves registers
  // within it; more would block the increase forever).
  static constexpr int kProducerRegs = 56, kConsumerRegs = 224;
  static constexpr uint32_t kABytes = kBlockM * kBlockK;         // 16 KB (128 rows x 128 bytes)
  static constexpr uint32_t kBBytes = kBlockN * kBlockK;         // 16 KB per 128-row B box (e4m3 or bf16)
  // The weights of 128 rows of one K block as loaded: a B box, or (W4A8) two int4 fragment blocks of 4 KB.
  static constexpr uint32_t kWBytes = kInt4 ? kBlockN * kBlockK / 2 : kBBytes;
  // A stage's B buffer: two weight boxes (gate and up; a wide Linear-2 tile's two blocks), or (W4A8) the four int4
  // blocks and, at kTokensOffset, the token box (the A box of the other formats, which have their own A buffers).
  static constexpr uint32_t kBStageBytes = 2 * kBBytes;
  static constexpr uint32_t kTokensOffset = 2 * kWBytes;
  static constexpr uint32_t kSaBytes = kBf16 ? 0 : kBlockM * sizeof(float);  // 512 B of A row scales (not bf16)
  static constexpr uint32_t kSbBytes = kInt4 ? kBlockN * sizeof(float) : 0;  // W4A8 weight-row scales per 128 rows
  static constexpr uint32_t kL1TxBytes = kABytes + 2 * (kWBytes + kSbBytes) + kSaBytes;  // gate + up rows
  static constexpr uint32_t kL2TxBytes = kABytes + kWBytes + kSbBytes + kSaBytes;
  static constexpr uint32_t kL2WideTxBytes = kABytes + 2 * (kWBytes + kSbBytes) + kSaBytes;  // l2_wide: 256 rows
  static_assert(kBlockK == 128 && kBlockM == 128 && kBlockN == 128, "one tile configuration");
  static_assert(kBlockKElems * kElemBytes == 128, "a K block row is one 128 B swizzle row");
  static_assert(kHPanelBytes * 2 == kStageBytes, "a bf16 h tile fills one staging slot");
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kThreads * 168, "register budget of one CTA");
};

inline constexpr int kSlotDispatch = 0, kSlotCombine = 1, kSlotPlan = 2;  // completion-signal slots
// (the workspace's device epochs are indexed by slot; call_prologue_kernel adds to [0] and [1])
static_assert(kSlotDispatch == 0 && kSlotCombine == 1, "moe_plan.cu's call prologue indexes the epochs by slot");


// (source rank, token, slot) of a received row, written by the dispatch with the row.
struct RecvMeta {
  int src, token, slot, pad;
};

template <class Sched_>
struct KernelParams {
  using Sched = Sched_;
  // FP8 maps; kBf16: the same tensors in bf16 with box {64, 128} (128 bytes x 128 rows, sw128), and no
  // tma_sa / tma_hs (zero).
  // The A operands (recv_x, and h read by Linear-2) are loaded in boxes of 64 rows: one box per CTA of a pair
  // (multicast), two per tile alone.
  CUtensorMap tma_x;   // recv_x of the local ranks: {H, ranks * rows_cap} u8, box {128, 64}, sw128
  CUtensorMap tma_sa;  // recv_sa: {rows_cap, ranks * H/128} f32, box {128, 1}
  CUtensorMap tma_w1;  // {H, experts * 2I} u8, box {128, 128}, sw128
  CUtensorMap tma_h;   // h: {I, ranks * rows_cap} u8, box {128, 128}, sw128 (the L1 epilogue's store)
  CUtensorMap tma_ha;  // h as Linear-2's A operand: the same tensor, box {128, 64}
  CUtensorMap tma_hs;  // h_scale: {rows_cap, ranks * I/128} f32, box {128, 1}
  CUtensorMap tma_w2;  // {I, experts * H} u8, box {128, 128}, sw128
  // W4A8: tma_w1 / tma_w2 (and tma_w2w, tma_w2h) map the local experts' int4 weights in the fragment layout
  // (moe::pack_int4_frag: W1 [experts][H/128][2I/64], W2 [experts][I/128][H/64] blocks of 4 KB) as rows of 256 bytes
  // (moe_layer.cpp); the per-(row, 128-group) scales, K-block-major: {2I, experts * H/128} and {H, experts * I/128}
  // fp32, box {128, 1}.
  CUtensorMap tma_s1, tma_s2;
  // Weight-sharing pairs: the weight maps again with 64-row boxes (each CTA of a pair multicasts its half of every weight box).
  CUtensorMap tma_w1h, tma_w2h;
  // a_trim (W8A8, W4A8): the two A operands again with 16-row boxes, for an expert's last row tile, whose A rows are
  // loaded only up to its valid rows rounded up to 16 (MoeLayerParams::a_trim).
  CUtensorMap tma_x16, tma_ha16;
  // merge_loads (W8A8, W4A8): one TMA load where a stage's boxes are adjacent: recv_x with 128-row boxes (h: tma_h);
  // W1 as {H, I, 2 experts} (an expert's gate and up halves on the third axis), box {128, 128, 2}: an N tile's gate
  // and up boxes; W2 with 256-row boxes: a wide Linear-2 tile's two blocks.
  CUtensorMap tma_x128, tma_w1gu, tma_w2w;
  // W4A8 with merge_loads: the group scales of those boxes, s1 as {I, 2, experts * H/128} (box {128, 2, 1}: gate's and
  // up's 128 columns) and s2 with 256-column boxes.
  CUtensorMap tma_s1gu, tma_s2w;
  runtime::TeamView view;
  int ctas_per_rank;
  // CTAs per cluster: 1, or 2 = CTA pairs (blocks 2i, 2i + 1 of one rank; the scheduler's instance i with two
  // roles: the same rows, N tiles 2j and 2j + 1) that share the A operand by TMA multicast.
  int cluster;
  int l2_prefetch;  // MoeLayerParams::l2_prefetch: weight K blocks prefetched into L2 ahead of the loads (0: off)
  int l2_prefetch_streamed;  // MoeLayerParams::l2_prefetch_streamed: only tiles of single short rows prefetch
  int pingpong;     // MoeLayerParams::pingpong: the consumer warpgroups' wgmma batches strictly alternate (1) or not (0)
  int l2_scratches;  // MoeLayerParams::l2_scratches: W8A8 Linear-2 scratch accumulators (1 or 2)
  int l2_hints;      // MoeLayerParams::l2_hints: kHint* bits
  int l2_wide;       // MoeLayerParams::l2_cols == 256: a Linear-2 tile is N-blocks 2n and 2n + 1
  // MoeLayerParams::l2_borrow resolved (l2_wide, W8A8 / W4A8, one L2 scratch): a wide L2 tile stages block 1 in the
  // B buffer of its last pipeline stage, which the epilogue warps then release to the producer.
  int l2_borrow;
  // MoeLayerParams::early_release resolved (W8A8 / W4A8): a consumer warp that finds the next K block's stage not yet
  // full releases the current one as soon as its last batch is done (next_stage_late in moe_kernel.cuh).
  int early_release;
  // MoeLayerParams::half_together resolved (W8A8; 1 for W4A8 and bf16, which ignore it): a half Linear-1 tile issues
  // its gate and up batches together and waits once per K block (l1_mainloop's `together`).
  int half_together;
  // MoeLayerParams::half_wide resolved (W8A8): a half Linear-1 tile not sharing its weights in a pair loads them gate-up
  // interleaved per warpgroup and runs one m64n128 batch per K block (l1_mainloop's `interleaved`).
  int half_wide;
  // MoeLayerParams::lean resolved: 1 = launch the lean W8A8 / W4A8 instantiation (moe_fused_kernel's kLean), which
  // holds no code for the other values of the options it fixes (only set where they hold).
  int lean;
  // CTA pairs sharing the weights (MoeLayerParams::pair_share resolved): 0 = no (A shared, or single CTAs), 1 = where
  // an expert's rows b, b + 1 are both full tiles, 2 = any two rows b, b + 1 of an expert (OwnRow in moe_kernel.cuh).
  int weight_pairs;
  int a_trim;  // MoeLayerParams::a_trim resolved: 1 = A rows loaded up to the tile's valid rows rounded up to 16
  int merge_loads;  // MoeLayerParams::merge_loads resolved: 1 = the merged maps above (CTAs loading whole boxes alone)
  int hidden, inter, topk, rows_cap;
  int tokens[runtime::kMaxRanks];  // this call's tokens of local rank g (0..MoeShape::tokens_per_rank)
  moe::DispatchLayout dl;  // tables in device memory
  typename Sched::Params sched[runtime::kMaxRanks];  // per local rank; layout rebased onto device tables
  const int32_t* topk_index[runtime::kMaxRanks];     // [T][k] of local rank g
  const int32_t* topk_pos[runtime::kMaxRanks];       // [T][k]: ordinal among the source's rows to that expert
  const uint8_t* x[runtime::kMaxRanks];        // [T][H] e4m3 codes, or bf16 (kBf16): rows of H * elem bytes
  const float* x_scale[runtime::kMaxRanks];    // null for kBf16
  runtime::PeerTable recv_x, recv_sa, recv_meta, combine, signal;
  uint8_t* h;             // local ranks' intermediate codes, [ranks][rows_cap][I] (kBf16: bf16)
  float* h_scale;         // [ranks][I/128][rows_cap] (kBf16: null)
  uint32_t* row_ready;    // [ranks][rows_cap / 128], zeroed before the launch
  const float* w1_scale;  // W8A8: [experts][2I/128][H/128] (W4A8: read through tma_s1)
  const float* w2_scale;  // W8A8: [experts][H/128][I/128] (W4A8: read through tma_s2)
  const uint32_t* dispatch_epoch;  // device: the dispatch signals per source this launch waits for (epoch * ctas)
  uint64_t timeout_ns;
  runtime::DeviceError* team_err;
  MoeDeviceError* err;
  // Per-tile trace (only read by the kTrace instantiation): ctas x trace_cap records of kTraceWords words.
  uint64_t* trace;
  int trace_cap;
};

// The option values the lean instantiation (moe_fused_kernel's kLean, KernelParams::lean) is compiled with: the
// check moe_layer.cpp makes before it launches the lean kernel, and the list of the kernel's `kLean ||` / `!kLean &&`
// sites (moe_kernel.cuh): a change to one is a change to the other.
template <class P>
bool lean_values_hold(const P& kp) {
  return kp.pingpong == 0 && kp.l2_scratches == 1 && kp.early_release == 0 && kp.l2_prefetch == 0 && kp.a_trim == 0 &&
         kp.merge_loads == 1 && kp.l2_hints == 0 && kp.half_together == 1 && kp.l2_borrow == kp.l2_wide;
}

// One traced tile (moe_layer.hpp's MoeTileTrace is the host view): word 0 the tile, then %globaltimer stamps
// (ns) and clock64 spans (cycles) of the MMA warpgroup 0 (thread 0) and of the tile's epilogue warp (lane 0).
inline constexpr int kTraceWords = 10;
enum TraceWord : int {
  kTrTile = 0,         // kind << 63 | half << 62 | expert << 40 | row << 16 | n
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
inline constexpr int kCombineThreads = 128;  // threads of a weighted-sum CTA (combine_kernel)
struct CombineParams {
  runtime::TeamView view;
  int tokens[runtime::kMaxRanks];  // this call's tokens of local rank g
  int topk, hidden;
  runtime::PeerTable combine;
  const float* weight[runtime::kMaxRanks];  // [T][k] of local rank g
  float* out[runtime::kMaxRanks];           // [T][H]
  // Device plan: local rank g writes nothing where its routing was rejected (null: a host plan, validated before).
  const MoePlanRecord* plan_rec;
};

// Launches (moe_launch.cu): the fused kernel for both schedulers and the three weight formats (cooperative,
// `grid` CTAs) and the weighted sum (`ranks` x `blocks` CTAs).
// trace: the instantiation with per-tile instrumentation (W8A8 only; compiled in only there).
cudaError_t launch_fused(const KernelParams<sched::MoeExpertWaveScheduler>& kp, MoeWeightFormat format, bool trace,
                         int grid, cudaStream_t stream);
cudaError_t launch_fused(const KernelParams<sched::MoeInterleavedScheduler>& kp, MoeWeightFormat format, bool trace,
                         int grid, cudaStream_t stream);
cudaError_t launch_combine(const CombineParams& cp, int blocks, int ranks, cudaStream_t stream);
// CTA pairs (clusters of two) of the fused kernel of this order / format that one GPU holds at once
// (cudaOccupancyMaxActiveClusters): a launch with kp.cluster == 2 may have at most this many pairs.
cudaError_t max_resident_pairs(MoeOrder order, MoeWeightFormat format, bool trace, int* pairs);
// W4A8: one unit of the e4m3 codes the packed int4 form expands to (subnormals: value v is code v x 2^-9).
inline constexpr float kInt4SmUnit = 512.0f;
// W4A8's fragment layout (moe::pack_int4_frag): one block is 64 weight rows x 128 K, 4 KB. The kernel's tensor maps of
// it see the bytes as rows of kInt4MapRow (no swizzle): a block is kInt4BlockRows of them.
inline constexpr uint32_t kInt4BlockBytes = 64 * kBlockK / 2;
inline constexpr int kInt4MapRow = 256, kInt4BlockRows = int(kInt4BlockBytes) / kInt4MapRow;
// pack_int4_weights' passes over `matrices` [rows][K] matrices of two's complement int4 (two per byte): atomicMin of
// the index of the first element holding -8 into *first (left alone if none), and the packing into the fragment
// layout (moe::pack_int4_frag per matrix; `out` must not overlap `in`).
cudaError_t launch_int4_find_minus8(const uint8_t* in, size_t bytes, unsigned long long* first, cudaStream_t stream);
cudaError_t launch_int4_pack_frag(const uint8_t* in, uint8_t* out, int matrices, int rows, int K, cudaStream_t stream);

}  // namespace xstage::moe_kernel
