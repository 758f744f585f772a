#pragma once
// The fused expert-parallel MoE layer: one persistent sm_90a kernel per layer call over a runtime::Team
// (real or emulated ranks) does dispatch -> Linear-1 (wgmma) -> SwiGLU -> Linear-2 -> combine stores into
// the source ranks' combine buffers; a small second kernel does the top-k weighted sum. Three precisions:
// W8A8 (FP8 e4m3, per-128 block-scale promotion, h requantised to FP8 1x128), W4A8 (int4 weights in the
// register-fragment layout, every tile computed transposed with the weights expanded exactly to e4m3 in registers as
// wgmma's A operand; h as W8A8's) and bf16 (reference runs: bf16 activations and weights, fp32
// accumulation, h kept in bf16). docs/MOE.md, "Fused kernel", says what is written, how it synchronises,
// and what has run on a GPU.
//
// Usage (every local rank's tensors in device memory):
//   MoeWorkspace ws(team, {hidden, inter, experts, topk, tokens_per_rank});         // W8A8, W4A8
//   MoeWorkspace ws(team, {hidden, inter, experts, topk, tokens_per_rank}, MoeWeightFormat::kBf16);  // bf16
//   MoeLayerParams p{...};                   // per local rank g: x, x_scale, topk_index, topk_weight, out; weights
//   run_moe_layer(team, ws, p, stream);      // enqueues; ws.check(team) after a sync names device errors
// The routing: either each local rank's top-k indices in device memory (MoeRankInputs::topk_index: the dispatch plan
// is computed on the device, the counts exchanged by peer stores; nothing of the call waits for the host), or every
// rank's on the host (MoeLayerParams::topk_index_all: the plan is built on the host, validated before anything is
// enqueued). Both give the same tables, so the same bits.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xstage/model/platform.hpp"
#include "xstage/moe/order_choice.hpp"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::moe_kernel {

// The one compiled configuration: 128-row tiles (two 64-row consumer warpgroups), 128-wide N tiles
// (Linear-1: 128 gate + 128 up columns -> 128 h columns), 128-deep K blocks (= the FP8 scale block; bf16
// uses 64-deep blocks of the same 128 bytes per row, moe_params.hpp says why).
inline constexpr int kBlockM = 128;
// MoeLayerParams::l2_hints bits.
enum MoeL2Hint : int { kHintCombineEvictFirst = 1, kHintW2EvictLast = 2, kHintW1EvictFirst = 4, kHintAll = 7 };
inline constexpr int kBlockN = 128;
inline constexpr int kBlockK = 128;

struct MoeShape {
  int hidden = 0;           // H, multiple of 128
  int inter = 0;            // I (per expert intermediate), multiple of 128
  int experts = 0;          // E over all ranks, multiple of the world size
  int topk = 0;             // k, 1 <= k <= E
  int tokens_per_rank = 0;  // T: the workspace's capacity; a call passes 0..T tokens per rank (MoeRankInputs::tokens)
};

// How the expert weights are stored. kFp8 (W8A8): e4m3 codes with 128x128 block scales. kInt4 (W4A8):
// int4 values in [-7, 7] (xstage::moe::quantize_int4's) in the register-fragment layout of xstage/moe/quant.hpp
// (moe::pack_int4_frag: packed sign-magnitude words in 4 KB blocks of 64 rows x 128 K; pack_int4_weights turns
// the two's complement form, two per byte with even k in the low nibble, into it once), one fp32 scale per (row,
// 128-group of K). Hopper has no 4-bit tensor cores: the fused kernel expands them exactly to e4m3 in registers
// (subnormals, in units of 2^-9: a mask and a rotation per 8 weights), as the A operand of a transposed tile,
// with the group scales promoted per weight row; nothing is expanded into memory.
// kBf16 (reference runs): activations AND weights bf16, no scales at all: MoeRankInputs::x points at bf16
// data [T][H], w1 / w2 at bf16 [experts][2I][H] / [experts][H][I], and x_scale, w1_scale, w2_scale must be
// null. fp32 accumulation over the whole K, h = silu(g) * u rounded to bf16 (no requantisation), the
// combine as for the other formats: moe::MoeReference's Precision::Bf16. Its receive and h buffers hold
// bf16 rows, so it needs a workspace built for it (MoeWorkspace(team, shape, MoeWeightFormat::kBf16)).
enum class MoeWeightFormat { kFp8 = 0, kInt4 = 1, kBf16 = 2 };

// Which tile order the kernel walks (both compile; the kernel must not depend on the order).
enum class MoeOrder { kExpertWave = 0, kInterleaved = 1 };

// Device tensors of one local rank. FP8 codes are e4m3 bytes; scales fp32 (xstage/moe/quant.hpp's
// conventions, DeepGEMM's block scales).
struct MoeRankInputs {
  const void* x = nullptr;           // [T][H] activations: e4m3 codes (kFp8, kInt4) or bf16 (kBf16)
  const float* x_scale = nullptr;    // [T][H/128] 1x128 scales (row-major, as quantize_act_1x128 gives);
                                     // null for kBf16
  const float* topk_weight = nullptr;  // [T][k] combine weights
  float* out = nullptr;              // [T][H] fp32 result (top-k weighted sum of bf16 expert outputs)
  // [T][k] global expert ids of this rank's tokens, each token's k distinct: the routing for the device plan (set it
  // for every local rank and leave MoeLayerParams::topk_index_all null). Read on the layer's stream. An invalid entry
  // makes MoeWorkspace::check throw UsageError naming rank, token, slot and value, as the host plan does; that rank's
  // `out` is not written (the other ranks' results are unaffected: a token's output depends on its own rows only).
  const int32_t* topk_index = nullptr;
  // This call's tokens of the rank, 0..T (MoeShape::tokens_per_rank, the workspace's capacity); -1: T. The tensors
  // above hold that many rows where they say [T]; out's rows past it are not written. With a device plan the ranks'
  // counts may differ (each rank passes its own); a host plan (topk_index_all, then [world][tokens][k]) needs the same
  // count on every rank.
  int tokens = -1;
};

// MoeLayerParams::pair_share values.
inline constexpr int kPairShareAuto = 0, kPairShareA = 1, kPairShareWeightsFull = 2, kPairShareWeights = 3;
// pair_share auto's threshold: weight-sharing pairs where one expert's Linear-1 weights exceed this fraction of the
// L2 (s28: they paid at 33 %, 40 %, 40 % and 47 % of the H200's L2 and not at 27 %; 0.5 until s28).
inline constexpr double kPairShareWeightsL2Fraction = 0.3;

struct MoeLayerParams {
  MoeShape shape;
  // Routing of every rank (host): index[(rank * n + t) * k + j] = global expert for the call's n tokens per rank
  // (MoeRankInputs::tokens, the same on every rank), for the host plan (null when the
  // local ranks' MoeRankInputs::topk_index are given instead). Validated before anything is enqueued (names rank,
  // token, slot, value); every rank of a real team must pass the same routing.
  const int32_t* topk_index_all = nullptr;
  MoeRankInputs rank[runtime::kMaxRanks];  // [g] for local rank first_rank + g
  // Weights of the experts of the local ranks, in global expert order starting at the first local
  // rank's first expert: (local ranks) x (E/P) experts.
  //   kFp8:  w1 [experts][2I][H] codes (rows [0, I) gate, [I, 2I) up), w1_scale [experts][2I/128][H/128];
  //          w2 [experts][H][I], w2_scale [experts][H/128][I/128]  (128x128 block scales)
  //   kInt4: w1 [experts] x [2I][H] int4 in the fragment layout (I * H bytes per expert: pack_int4_weights),
  //          w1_scale [experts][H/128][2I] (K-block-major: the 2I row scales of one 128-group contiguous, so TMA
  //          loads them per row); w2 [experts] x [H][I] in the fragment layout, w2_scale [experts][I/128][H].
  //          (xstage::moe::quantize_int4 gives [rows][K/128] scales: transpose per expert.)
  //   kBf16: w1 [experts][2I][H] bf16, w2 [experts][H][I] bf16 (the same row layout as kFp8); both scales null.
  MoeWeightFormat weights = MoeWeightFormat::kFp8;
  const void* w1 = nullptr;  // e4m3 codes, int4 bytes or bf16, by `weights`
  const float* w1_scale = nullptr;
  const void* w2 = nullptr;
  const float* w2_scale = nullptr;
  MoeOrder order = MoeOrder::kExpertWave;
  int experts_per_wave = 0;  // Expert-Wave: local experts per wave; 0: waves sized to fill the CTAs
  // Expert-Wave: 1 = each wave's Linear-2 tiles after the next wave's Linear-1 tiles (sched::MoeExpertWaveScheduler's
  // wave_lag), so they wait on rows a wave old, not on the wave's last Linear-1 tiles still running; 0 = right after
  // the wave's own (the paper's Expert-Wave, the default). On the W8A8 grid at P = 1, 1 took 0.71-0.86x the time of 0
  // on DiT-MoE-XL at 2K / 8K, 0.87-0.98x on most other points and 1.02-1.08x on balanced hidden-4096 layers at 8K / 32K
  // (docs/MOE-NOTEBOOK.md "Session 54"); `auto` (moe::choose_moe_order) picks it where the simulator says it pays clearly.
  // Bit-identical either way.
  int wave_lag = 0;
  int lead = 0;              // Interleaved: D >= 1 (the kernel waits on L1 rows in order); 0: moe_lead_knee
  int ctas_per_rank = 0;     // 0: team.sms_per_rank() (even with CTA pairs, and as many as can be resident)
  // CTA pairs: 2 = clusters of two CTAs that take the same rows and neighbouring N tiles and load the shared A
  // operand once for both (TMA multicast: the pair reads A from L2 once, not twice); 1 = single CTAs;
  // pairs need both N-tile counts even (I/128, and hidden over the Linear-2 tile width, l2_cols). 0 = auto = pairs wherever they fit (even N-tile counts,
  // an even ctas_per_rank if one is given, the pairs resident), else single CTAs (docs/MOE.md, "CTA pairs").
  int cluster = 0;
  // What the two CTAs of a pair share (with CTA pairs; single CTAs share nothing). 1 = the A operand: the same
  // rows, N tiles 2j and 2j + 1, each CTA loading half of A into both. 2 = the weights where both of an expert's
  // row tiles b, b + 1 (b even) are full tiles: the pair's positions of those two rows compute row b + crank at one
  // N tile and each CTA loads half of every weight box into both, so the two rows read the expert's weights once;
  // other rows as 1. 3 = as 2 for any two row tiles of an expert (a full tile with a half one too). 0 = auto (the
  // default): 3 where one expert's Linear-1 weights (2 inter x hidden bytes) exceed kPairShareWeightsL2Fraction of
  // the GPU's L2, so that the expert's concurrent row tiles cannot count on L2 to read them once, else 1
  // (moe_pair_share). Weight sharing needs W8A8 / W4A8 and, with Interleaved, a lead D >= 2 (an L2 tile may compute
  // the next row). Bit-identical either way. Measured (docs/MOE-NOTEBOOK.md, "Session 26", "Session 28"): DeepSeek-V4-Pro at
  // 8K tokens, 3 reads 26.4 GB from DRAM against 35.0 GB with 1 (the ~25.9 GB minimum), 0.95-0.97x the time; V4-Pro
  // at 32K 0.93-0.99x; DeepSeek-V3 (W1 at 47 % of the H200's L2) and three layers with W1 at 33-42 %: Interleaved
  // 0.957-0.979x (geomean), Expert-Wave 0.99-1.01x; experts at 27 % (V4-Flash, GLM-Flash) and below 0.99-1.04x.
  int pair_share = kPairShareAuto;
  // Weight prefetch into L2: the producer also asks L2 for the weight boxes of the K block this many blocks
  // beyond the one it loads (TMA prefetch, no shared memory), so the later load finds them there instead of in
  // HBM. 0 = off (the default: measured as an option, docs/MOE.md); at most 64. W8A8 and bf16 (W4A8 ignores it).
  int l2_prefetch = 0;
  // Which tiles prefetch (with l2_prefetch > 0): 0 = every tile; 1 = only the tiles of experts with one row of at most
  // 64 tokens ("streamed" rows, sched::spread_row_order's): their weights serve that row alone and always come from
  // HBM, where a half tile's few stages in flight do not cover the latency (docs/MOE-NOTEBOOK.md, "Session 29"). Bit-identical
  // either way.
  int l2_prefetch_streamed = 0;
  // The two MMA warpgroups' wgmma batches strictly alternate (FA3's ping-pong, named barriers): a warpgroup issues
  // its next batch once the other has issued, so each one's fp32 promotion runs under the other's batch instead
  // of both promoting at once while the tensor cores idle (W8A8, W4A8; bf16 has no per-block promotion and
  // ignores it). 1 = on, 0 = the warpgroups run free (the default: on measured a wash at P = 1, docs/MOE.md).
  // Results are bit-identical either way.
  int pingpong = 0;
  // Scratch accumulators of the W8A8 Linear-2 mainloop: 1 = issue, wait, promote (the default); 2 = a block's
  // batch is issued before the previous block's is promoted (one batch of the warpgroup always in flight; measured
  // a wash at P = 1, docs/MOE.md). Bit-identical either way (the same promotion order); W4A8 and bf16 ignore it.
  int l2_scratches = 1;
  // L2 cache hints (a bit set of MoeL2Hint; 0 = none, the default): evict_first on the combine stores (each entry
  // is read once, by the weighted sum after the kernel), evict_last on the Linear-2 weight loads (an expert's W2
  // serves all its row blocks, which Interleaved spreads over time), evict_first on the Linear-1 weight loads.
  // Results are bit-identical either way; measured as options (docs/MOE-NOTEBOOK.md, "Session 23"). W4A8's weight loads
  // take no hint (since s47: its TMA maps of the int4 fragment layout); its combine stores do.
  int l2_hints = 0;
  // Columns of a Linear-2 tile: 0 = auto (the default: 256 for W8A8 / W4A8 where hidden is a multiple of 512, else
  // 128; moe_l2_cols), 128, or 256 (W8A8 / W4A8; where 256 does not divide hidden the last tile is ragged: its second
  // 128-column block is computed on whatever the weight box holds and never stored; CTA pairs need an even count of
  // tiles, the ragged one included). On DiT-MoE-XL (hidden 1152, ragged) 256 took 0.92-0.96x the time of 128 with W8A8
  // Expert-Wave from 24K tokens per rank, but 0.98-1.16x at 2K-16K, 1.08-1.34x with W4A8 below 24K and 1.28-1.46x with
  // the Interleaved order (docs/MOE-NOTEBOOK.md, "Session 54"), so auto keeps 128 there. A 256-column
  // tile computes two 128-column blocks from one A operand per K block, two batches per 48 KB stage as a Linear-1
  // tile does (128-column tiles run one batch per stage, at 0.44-0.47 of the tensor rate against Linear-1's 0.68,
  // s23), and hands its output to the epilogue as two 128-column halves. Measured 1.01-1.11x faster than 128 at
  // every W8A8 / W4A8 point of the grid with hidden % 512 == 0 (s24, docs/MOE.md). Bit-identical either way (every element's promotion sequence is the same).
  int l2_cols = 0;
  // A rows loaded per tile (W8A8, W4A8; bf16 ignores it): 1 = the valid rows rounded up to 16, 0 = all 128 (64 for a
  // half tile; the default). An expert's last row tile holds fewer tokens than 128 rows; its A operand's padding rows
  // are then not loaded (boxes of 16 rows), which only shortens what the stage streams: the rows past the valid ones
  // feed only their own outputs, which nothing stores. Bit-identical either way (docs/MOE-NOTEBOOK.md, "Session 27").
  int a_trim = 0;
  // TMA loads per stage (W8A8, W4A8; bf16 ignores it): 1 = one load where a stage's boxes are adjacent in memory (a
  // CTA's whole 128-row A operand; an N tile's gate and up boxes through a 3-d view of W1; a 256-column Linear-2 tile's
  // two weight blocks), 0 = a load per 64-row A half and per 128-row weight box. CTA pairs keep their per-half
  // multicasts. Bit-identical either way (docs/MOE-NOTEBOOK.md, "Session 27").
  int merge_loads = 1;
  // Where a 256-column Linear-2 tile stages its second 128-column output block for the epilogue warps (W8A8, W4A8
  // with l2_scratches 1; others ignore it): 1 = in the B buffer of the tile's last pipeline stage, which the MMA
  // warpgroups keep instead of releasing and the epilogue warps hand back to the producer once they have read it,
  // so the warpgroups go on to the next tile at once; 0 = through the one staging slot after the first block, which
  // the warpgroups wait for while the epilogue warps store the first block (~3.5 us per tile on DeepSeek-V4-Pro at
  // 8K, docs/MOE-NOTEBOOK.md "Session 26"). Measured with 0 against 1 (s28, same process, W8A8 on six shapes at 8K and 32K):
  // Interleaved 1.008-1.015x the time (geomean), Expert-Wave 1.025-1.037x; W4A8 0.99-1.01x. Bit-identical either
  // way (docs/MOE-NOTEBOOK.md, "Session 28").
  int l2_borrow = 1;
  // When an MMA warp hands a K block's stage back to the producer (W8A8; W4A8 and bf16 ignore it): 1 = as soon as the
  // block's last batch is done where the next block's stage is not full yet (tested in that batch's shadow), so a
  // tile waiting for its data has every stage but the one being read in flight; else, and with 0 (the default),
  // after the next block's first batch is issued (off the warps' critical path when the data is there, docs/MOE.md
  // "Session 23"). Measured with 1 against 0 (s28, same process, W8A8 at 8K and 32K on six shapes): Expert-Wave
  // 1.013-1.019x faster (geomean), Interleaved 0.992-0.995x, W4A8 (s46's kernel) 0.997-0.998x; so off. Bit-identical
  // either way.
  int early_release = 0;
  // The order the tile schedulers walk a rank's rows in (both orders; positions of sched::MoeLayout): 0 = rows in
  // expert order (the default), 1 = sched::spread_row_order: the rows of experts with one row of at most 64 tokens,
  // whose weights stream from DRAM for that row alone, spread evenly between the other rows (kept in order and in
  // pairs), so that the DRAM stream and the tensor work overlap instead of alternating in runs (skewed routing,
  // docs/MOE-NOTEBOOK.md "Session 29"). W8A8 only (W4A8 and bf16 ignore it: not measured there). Bit-identical either way (a
  // row's tiles compute the same values wherever they run).
  int row_order = 0;
  // A half Linear-1 tile's K block (W8A8; W4A8 and bf16 ignore it): 1 = its gate and up batches (m64n64 per
  // warpgroup) issued back to back into two scratch accumulators and waited for once; 0 = one batch at a time, each
  // waited for and promoted before the next is issued (the full tile's structure, whose 192 accumulators leave no
  // room for a second scratch). Bit-identical either way (docs/MOE-NOTEBOOK.md, "Session 29").
  int half_together = 1;
  // A half Linear-1 tile's weight boxes (W8A8; W4A8 and bf16 ignore it): 1 = where the tile loads its own weights
  // (single CTAs, A-sharing pairs; not a weight-sharing pair, whose boxes are multicast as a full tile's), the producer
  // loads them as four 64-row boxes, gate-up interleaved per warpgroup, and each warpgroup runs one m64n128 batch per
  // K block over its 64 gate and 64 up columns; 0 = two m64n64 batches over the gate and up boxes as loaded for a full
  // tile (half_together). An m64n64 batch reads as many shared-memory bytes of A as of B (~128 B per cycle at the
  // tensor rate): on V4-Pro at 2K (every tile a half tile) on 32 CTAs the half tiles' K block took ~1200 cycles
  // against 512 of tensor work, with the data there 85 % of the time (docs/MOE-NOTEBOOK.md, "Session 29"). Bit-identical
  // either way.
  int half_wide = 1;
  // W8A8 and W4A8 untraced launches: 1 = where pingpong, l2_scratches, early_release, l2_prefetch, a_trim,
  // merge_loads, l2_hints and half_together are at their defaults and l2_borrow goes with the tile width (256-column
  // Linear-2 tiles staged through the borrowed stage, or 128-column ones through the slot), run the kernel compiled without the other paths'
  // code (a second instantiation, the same computation bit for bit; W8A8 SASS 112 KB against 181 KB); 0 = always the
  // kernel that holds them all. A build with 20 KB more code that never ran was 8-11 % slower on every shape, and the
  // lean kernel is 2-8 % faster than the full one (docs/MOE-NOTEBOOK.md, "Session 30"): code a launch does not use is not free.
  int lean = 1;
  // The padding rows of each expert's last row tile (moe::loaded_padding_rows: the rows past its tokens that the tile
  // loads as its A operand, and their row scales): 1 (the default) = zeroed in the launch's prologue kernel, 0 = left
  // as they are. They only feed padding outputs, which nothing stores, so the result is bit-identical either way. What
  // they hold reaches the tensor cores, whose power depends on their operands' values, and these layers run at the
  // H200's 700 W limit, where the power sets the clock. Left alone they hold an earlier call's rows where the routing
  // changes between calls. Measured (session 58, docs/MOE-NOTEBOOK.md): the W8A8 mainloop on every SM with A zero
  // takes 0.93x the time of random A (20 % zero rows 0.955x); on stale rows the W8A8 8K layers took 0.95-1.01x the
  // time with 1 (median 0.983 over six layers x two processes, 10 of 12 below 1; the zeroing included); W4A8, V4-Pro at
  // 32K and DiT-MoE-XL within +-1 %.
  int zero_padding = 1;
  // Per-tile instrumentation (W8A8 only): runs the traced instantiation and records every tile of the launch
  // in the workspace (MoeWorkspace::read_trace). The untraced kernels contain no trace code at all.
  bool trace = false;
};

// W4A8 weights into the layout MoeWeightFormat::kInt4 takes, on the device, once per set of weights: `matrices`
// back-to-back [rows][K] matrices of two's complement int4 at `twos` (two per byte, even k in the low nibble:
// quantize_int4's Int4Tensor::packed; rows * K / 2 bytes each) into the fragment layout at `out` (the same size; may
// be `twos`: then through a temporary buffer). W1 is `experts` matrices of [2I][H], W2 `experts` of [H][I].
// Synchronous on `stream`. rows must be a multiple of 64 and K of 128 (UsageError naming the shape); an element
// holding -8 (the packed form holds [-7, 7]) is a UsageError naming its matrix, row and column, and nothing is
// written then.
void pack_int4_weights(const void* twos, void* out, int matrices, int rows, int K, cudaStream_t stream = nullptr);

// MoeLayerParams::pair_share resolved for this launch: kPairShareA, kPairShareWeightsFull or kPairShareWeights
// with CTA pairs (auto: kPairShareWeights where one expert's Linear-1 weights exceed kPairShareWeightsL2Fraction of
// the device's L2, W8A8 / W4A8, and the interleaved lead allows it; else kPairShareA), 0 with single CTAs.
int moe_pair_share(runtime::Team& team, const MoeLayerParams& prm);

// MoeLayerParams::l2_cols resolved: 0 (auto) -> 256 for W8A8 / W4A8 with hidden % 512 == 0, else 128; any other
// value as given (run_moe_layer validates it).
int moe_l2_cols(const MoeLayerParams& prm);
// Linear-2 tiles per row of l2_cols columns over `hidden` (a multiple of 128): the last one ragged where l2_cols does
// not divide hidden (a 256-column tile whose second 128-column block lies past hidden: computed, never stored).
constexpr int moe_l2_tiles(int hidden, int l2_cols) { return (hidden + l2_cols - 1) / l2_cols; }

// One traced tile. Stamps are %globaltimer ns (common to all SMs); spans are clock64 cycles of one SM.
struct MoeTileTrace {
  int rank = 0, cta = 0, index = 0;  // local rank, its CTA (scheduler instance), the tile's ordinal in it
  bool l2 = false;                   // Linear-2 tile (else Linear-1)
  bool half = false;                 // half tile (at most 64 rows of tokens: rows [0, 64), N split by warpgroup)
  int expert = 0, row = 0, n = 0;    // local expert, scheduler row, N tile
  uint64_t mma_start_ns = 0, mma_end_ns = 0;  // MMA warpgroup 0: tile start, mainloop done (L1: + SwiGLU)
  uint64_t mma_cycles = 0;                    // the same span in cycles
  uint64_t slot_wait_cycles = 0;              // MMA side waiting for a free staging slot
  uint64_t epi_start_ns = 0;                  // the epilogue warp has the slot
  uint64_t epi_read_cycles = 0;   // first store issued -> the stores have read the slot (T_RS, sender-visible)
  uint64_t epi_done_cycles = 0;   // L1: -> the stores are complete (then row readiness); L2: 0
  uint64_t first_wait_cycles = 0;  // tile start -> its first stage is full (producer waits + TMA latency)
  uint64_t full_wait_cycles = 0;   // all waits for full stages within the tile (the mainloop starving)
};

// First failure the fused kernel recorded (device memory; decoded by MoeWorkspace::check).
struct MoeDeviceError {
  int code;  // 0 none, 2 Linear-1 row readiness timeout (a dispatch signal's timeout is the team's record, Team::check)
  int rank, peer_or_row;
  uint32_t expected, got;
};

// What MoeWorkspace::fill_receive writes into the receive rows: 0xFF bytes (NaN codes and scales, as poison), zeros,
// or random finite values (an earlier call's rows).
enum class MoeReceiveFill { kNaN, kZero, kStale };

// The symmetric and local buffers of one layer shape, the completion signals and the epoch. Sized for
// the worst routing (moe::max_recv_rows), so any routing of this shape fits.
class MoeWorkspace {
 public:
  // `format`: the weight format of the calls it serves. kFp8 and kInt4 share one layout (e4m3 receive and
  // h rows with their 1x128 scales); kBf16 needs bf16 rows (receive and h buffers twice as large, no scale
  // buffers). A call whose format needs the other layout is a UsageError naming both.
  MoeWorkspace(runtime::Team& team, const MoeShape& shape, MoeWeightFormat format = MoeWeightFormat::kFp8);
  ~MoeWorkspace();
  MoeWorkspace(const MoeWorkspace&) = delete;
  MoeWorkspace& operator=(const MoeWorkspace&) = delete;

  const MoeShape& shape() const { return shape_; }
  int rows_capacity() const { return rows_cap_; }  // receive rows per rank (multiple of kBlockM)
  bool bf16_rows() const { return bf16_; }          // built for MoeWeightFormat::kBf16
  // Waits for `stream` (the one the layer ran on) and the team's stream, then throws RuntimeError naming the first
  // device failure of the MoE kernel (rank, and the peer or the row it waited for) or of the team's record; clears
  // both. The two-argument form waits for the team's stream only: for layers run on it.
  void check(runtime::Team& team, const std::string& what, cudaStream_t stream);
  void check(runtime::Team& team, const std::string& what) { check(team, what, team.stream()); }
  // Tests: fills the receive, intermediate and combine buffers of the local ranks with 0xFF (FP8 and bf16
  // NaN, fp32 NaN scales; a bf16 workspace has no scale buffers), so untouched padding rows or combine
  // entries show up as NaN in the output. Collective in a real team: every rank's poison is done (its stream
  // synchronised, then a team barrier) before this returns, so a faster peer's next launch cannot dispatch rows or
  // metadata into this rank's buffers before the poison overwrites them (found with real ranks on two H200s:
  // poisoned (source, token, slot) entries sent the combine stores to wild addresses).
  void poison(cudaStream_t stream);
  // Benchmarks and tests: fills the local ranks' receive rows (codes and row scales; nothing else) with `what`:
  // MoeReceiveFill::kStale stands for the rows an earlier call left there, which is what a padding row holds when the
  // routing changes from call to call (random finite codes, scales in [1/448, 2/448), bf16 values in (-4, 4); seeded).
  // Collective in a real team, as poison.
  void fill_receive(MoeReceiveFill what, cudaStream_t stream, uint32_t seed = 1);
  // The local ranks' receive rows as they are now (synchronises `stream`): codes [local ranks][rows][row bytes] and
  // row scales [local ranks][H/128][rows] (none in a bf16 workspace).
  struct ReceiveRows {
    std::vector<uint8_t> codes;
    std::vector<float> scales;
  };
  ReceiveRows read_receive(cudaStream_t stream) const;
  // The tiles of the last traced launch (synchronises the team's stream), every local rank, in CTA order.
  std::vector<MoeTileTrace> read_trace(runtime::Team& team) const;
  // The tables of the last prepared routing as the kernel reads them (synchronises `stream`): tests compare a device
  // plan's with a host plan's. index and pos: [local ranks][T][k]; tokens: [local ranks][E/P].
  struct PlanTables {
    std::vector<int32_t> counts, src_base, row_offset, tokens, index, pos;
  };
  PlanTables read_plan_tables(cudaStream_t stream) const;

 private:
  friend void prepare_moe_layer(runtime::Team&, MoeWorkspace&, const MoeLayerParams&, cudaStream_t);
  friend void prepare_device_plan(runtime::Team&, MoeWorkspace&, const MoeLayerParams&, cudaStream_t);
  friend void launch_moe_layer(runtime::Team&, MoeWorkspace&, const MoeLayerParams&, cudaStream_t);
  void check_params(runtime::Team& team, const MoeLayerParams& prm) const;
  struct Prepared;  // the routing of the last prepare: which plan, table offsets, the host plan's rows and row orders
  std::unique_ptr<Prepared> prepared_;
  runtime::Team& team_;
  MoeShape shape_;
  bool bf16_ = false;  // receive and h rows in bf16 (kBf16); recv_sa_ and h_scale_ are then not allocated
  int rows_cap_ = 0;
  std::unique_ptr<runtime::SymmetricBuffer> recv_x_, recv_sa_, recv_meta_, h_, h_scale_, row_ready_, combine_;
  std::unique_ptr<runtime::SymmetricBuffer> plan_counts_;  // the device plan's counts exchange, [P][E] int32
  std::unique_ptr<runtime::SignalSet> signals_;
  MoeDeviceError* err_ = nullptr;
  // One allocation: the device plan's per-call record of each local rank and its sticky error (moe_plan.hpp), then the
  // signals expected per (slot, source) so far, by slot (counters only grow). The epochs live on the device and are
  // advanced by the call's own kernels, so a captured call replays with fresh targets.
  void* plan_state_ = nullptr;
  // Device copies of the per-call tables (reallocated when too small).
  void* tables_ = nullptr;
  size_t tables_bytes_ = 0;
  std::vector<int32_t> host_tables_;  // their host image, kept between calls (no fresh pages per call)
  uint64_t* trace_ = nullptr;  // [ranks * ctas][trace_cap_][kTraceWords] of the last traced launch
  size_t trace_bytes_ = 0;
  int trace_cap_ = 0, trace_ctas_ = 0, trace_ctas_per_rank_ = 0;
};

// prepare + launch. Validates everything (UsageError with the value and the rule), builds the dispatch
// plan, uploads the tables and enqueues on `stream`: the fused kernel (one cooperative launch serving
// every local rank), the wait for every rank's combine stores, and the weighted-sum kernel.
void run_moe_layer(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& params, cudaStream_t stream);

// The two halves of run_moe_layer. prepare: a routing's dispatch plan and its device tables on `stream` (host plan:
// validated and built on the host, uploaded; device plan: made by the plan kernels, moe_plan.hpp); launch: the fused
// kernel with the tensors of `params` and the last prepared routing (no routing is read again). A benchmark times
// launch alone for a fixed routing. A call with a device plan can be captured in a CUDA graph and replayed (its signal
// targets are epochs on the device; every buffer it reads is read at replay): warm it up once first (the workspace
// allocates its tables on first use). A host plan cannot (its routing is read on the host): prepare refuses a capturing
// stream then; launch alone may be captured and replays the prepared routing.
void prepare_moe_layer(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& params, cudaStream_t stream);
void launch_moe_layer(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& params, cudaStream_t stream);

// CTAs per rank and CTAs per cluster (1 or 2) a launch with these parameters uses (MoeLayerParams::ctas_per_rank
// and ::cluster resolved against the team and the GPU); throws the launch's UsageError for invalid ones.
int moe_launch_ctas(runtime::Team& team, const MoeLayerParams& params, int* cluster);

// The Interleaved lead of every Linear-1 tile first (the C ABI's XSTAGE_MOE_L1_FIRST): moe::kLeadAllRows.
using moe::kLeadAllRows;
// D_knee of the interleaved order for `ctas` CTAs per rank: ceil(ctas * 128 / inter) scheduler rows.
int moe_lead_knee(int ctas, int inter);

// `auto` for a layer of prm's shape and format (the harness's fused column, the C ABI's xstage_moe_auto_order): the
// order the platform model `mx` picks on `ctas` CTAs per rank of `world` ranks with `l2_bytes` of L2, the tiles timed
// at `rate_per_sm` FLOP/s (moe::estimate_mma_times), and the discrete-event simulator's prediction of both orders at
// the kernel's lead (routing `routing`, seed `seed`), which the rule follows at P = 1 (moe/order_choice.hpp).
struct MoeOrderAdvice {
  moe::OrderQuery query;   // with sim_wave_s / sim_interleaved_s where the simulator ran
  moe::OrderChoice choice;
  std::string sim_error;   // why the simulator refused the configuration ("" if it ran)
};
MoeOrderAdvice advise_moe_order(const model::Platform& mx, const MoeLayerParams& prm, int world, int ctas,
                                double l2_bytes, moe::RoutingKind routing, std::uint64_t seed, double rate_per_sm);

// Why the shape cannot run ("" if it can), for callers that want to check before allocating.
std::string check_moe_shape(const MoeShape& s, int world);

// How this library's kernels were post-processed at build time ("" for none), for benchmark records:
// "ffma-yield F" when the build ran scripts/sass-ffma-yield.py with fraction F (CMake XSTAGE_MOE_FFMA_YIELD).
const char* moe_kernel_build();

}  // namespace xstage::moe_kernel
