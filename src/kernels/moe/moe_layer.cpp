// Host entry of the fused MoE layer kernel (moe_layer.hpp): validation, the dispatch plan and its device
// tables, TMA descriptors, and the launches (moe_launch.cu). docs/MOE.md says what has run on a GPU.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "xstage/runtime/tensor_map.hpp"
#include "moe_params.hpp"
#include "moe_layer.hpp"

#include "xstage/common/error.hpp"
#include "xstage/moe/dispatch_plan.hpp"
#include "xstage/moe/order_sim.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::moe_kernel {
namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(detail::concat("moe layer: ", what, " failed: ", cudaGetErrorString(e)));
}

size_t round16(size_t n) { return (n + 15) / 16 * 16; }

// A device scratch buffer of the workspace (`p`, `have` bytes) grown to at least `bytes`; its contents are not kept.
template <class T>
T* grow(T*& p, size_t& have, size_t bytes, const char* what) {
  if (bytes > have) {
    if (p != nullptr) ok(cudaFree(p), detail::concat("cudaFree (", what, ")").c_str());
    p = nullptr;
    have = 0;
    void* q = nullptr;
    ok(cudaMalloc(&q, bytes), detail::concat("cudaMalloc (", what, ")").c_str());
    p = static_cast<T*>(q);
    have = bytes;
  }
  return p;
}


// What a 2-d map holds: FP8 bytes with the 128 B swizzle (box {128, 128}), bf16 with the 128 B swizzle (box
// {64, 128}: the same 128 bytes x 128 rows), or fp32 scales without (box {128, 1}).
enum class MapKind { kFp8, kBf16, kF32 };

// A tiled map of any rank (rank <= 3). dims innermost first, strides (bytes) of dims 1.. .
void make_map_nd(CUtensorMap* map, const void* base, CUtensorMapDataType type, int rank, const cuuint64_t* dims,
                 const cuuint64_t* strides, const cuuint32_t* box, bool swizzle, const char* what) {
  auto enc = runtime::tensor_map_encoder();
  if (enc == nullptr) throw RuntimeError("moe layer: cuTensorMapEncodeTiled is not available from the driver");
  const cuuint32_t es[3] = {1, 1, 1};
  const CUresult r = enc(map, type, rank, const_cast<void*>(base), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw RuntimeError(detail::concat("moe layer: TMA descriptor of ", what, " rejected (CUresult ", int(r), "; ",
                                      dims[0], " x ", dims[1], rank > 2 ? " x " + std::to_string(dims[2]) : "", ")"));
}

// 2-d row-major map {cols, rows} (elements).
// box_rows: rows of a tile box (128; 64 for the A operands, which a CTA pair loads half by half; 16 for a_trim; 256
// for a wide Linear-2 tile's two weight blocks).
void make_map_2d(CUtensorMap* map, const void* base, MapKind kind, uint64_t cols, uint64_t rows, const char* what,
                 uint32_t box_rows = 128) {
  const bool tile = kind != MapKind::kF32;
  const uint64_t elem = kind == MapKind::kFp8 ? 1 : kind == MapKind::kBf16 ? 2 : 4;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * elem};
  const cuuint32_t box[2] = {kind == MapKind::kBf16 ? 64u : 128u, tile ? box_rows : 1u};
  const CUtensorMapDataType type = kind == MapKind::kFp8    ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : kind == MapKind::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  make_map_nd(map, base, type, 2, dims, strides, box, tile, what);
}

// MoeLayerParams::half_wide resolved: W8A8 only. The kernel flag and the 64-row W1 map it loads through follow it.
bool half_wide_on(const MoeLayerParams& prm) { return prm.weights == MoeWeightFormat::kFp8 && prm.half_wide == 1; }

// Everything of the kernel parameters that does not depend on the scheduler type.
template <class Sched>
void fill_common(KernelParams<Sched>& kp, runtime::Team& team, const MoeLayerParams& prm, int ctas,
                 const CUtensorMap (&maps)[18], int cluster, int share) {
  kp.tma_x = maps[0];
  kp.tma_sa = maps[1];
  kp.tma_w1 = maps[2];
  kp.tma_h = maps[3];
  kp.tma_hs = maps[4];
  kp.tma_w2 = maps[5];
  kp.tma_s1 = maps[6];
  kp.tma_s2 = maps[7];
  kp.tma_ha = maps[8];
  kp.tma_w1h = maps[9];
  kp.tma_w2h = maps[10];
  kp.tma_x16 = maps[11];
  kp.tma_ha16 = maps[12];
  kp.tma_x128 = maps[13];
  kp.tma_w1gu = maps[14];
  kp.tma_w2w = maps[15];
  kp.tma_s1gu = maps[16];
  kp.tma_s2w = maps[17];
  const bool bf16 = prm.weights == MoeWeightFormat::kBf16;  // bf16 has neither option (no such maps)
  kp.a_trim = !bf16 && prm.a_trim == 1 ? 1 : 0;
  kp.merge_loads = !bf16 && prm.merge_loads == 1 ? 1 : 0;
  kp.weight_pairs = share > kPairShareA ? share - kPairShareA : 0;  // the kernel's encoding (KernelParams::weight_pairs)
  kp.view = team.view();
  kp.ctas_per_rank = ctas;
  kp.cluster = cluster;
  kp.l2_prefetch = prm.l2_prefetch;
  kp.l2_prefetch_streamed = prm.l2_prefetch_streamed;
  kp.l2_hints = prm.l2_hints;
  kp.l2_wide = moe_l2_cols(prm) == 256 ? 1 : 0;
  kp.pingpong = prm.pingpong;
  kp.l2_scratches = prm.l2_scratches;
  // l2_borrow: 256-column Linear-2 tiles of W8A8 / W4A8 with one scratch (the two-scratch loop has no keep_last).
  kp.early_release = prm.weights != MoeWeightFormat::kBf16 && prm.early_release == 1 ? 1 : 0;
  // half_together: W8A8's (W4A8 and bf16 ignore it; 1 there, the value the lean W4A8 kernel is compiled with).
  kp.half_together = prm.weights != MoeWeightFormat::kFp8 || prm.half_together == 1 ? 1 : 0;
  kp.half_wide = half_wide_on(prm) ? 1 : 0;
  kp.l2_borrow = kp.l2_wide && prm.weights != MoeWeightFormat::kBf16 && prm.l2_scratches == 1 && prm.l2_borrow == 1 ? 1 : 0;
  // MoeLayerParams::lean: the lean instantiation is compiled with the values lean_values_hold checks (moe_params.hpp).
  kp.lean = prm.lean == 1 && prm.weights != MoeWeightFormat::kBf16 && !prm.trace && lean_values_hold(kp) ? 1 : 0;
  kp.hidden = prm.shape.hidden;
  kp.inter = prm.shape.inter;
  kp.topk = prm.shape.topk;
  kp.w1_scale = prm.w1_scale;
  kp.w2_scale = prm.w2_scale;
  kp.timeout_ns = team.timeout_ns();
  kp.team_err = team.error_record();
}

}  // namespace

void pack_int4_weights(const void* twos, void* out, int matrices, int rows, int K, cudaStream_t stream) {
  XSTAGE_REQUIRE(matrices >= 0 && rows >= 0 && K >= 0 && rows % 64 == 0 && K % 128 == 0, "pack_int4_weights: ",
                 matrices, " matrices of ", rows, " x ", K,
                 ": rows must be a multiple of 64 and K of 128 (the fragment layout's 64 x 128 blocks)");
  const size_t per = size_t(rows) * K / 2;
  // (a product past 2^50 bytes is no device's memory, and past 2^64 it would wrap to a size that packs nothing)
  XSTAGE_REQUIRE(matrices == 0 || per <= (size_t(1) << 50) / size_t(matrices), "pack_int4_weights: ", matrices,
                 " matrices of ", rows, " x ", K, " int4 weights are more than 2^50 bytes");
  const size_t bytes = size_t(matrices) * per;
  if (bytes == 0) return;
  XSTAGE_REQUIRE(twos != nullptr && out != nullptr, "pack_int4_weights: null buffer");
  // (its kernels move 32-bit words: a misaligned pointer would be a device fault, not an error)
  XSTAGE_REQUIRE(reinterpret_cast<uintptr_t>(twos) % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0,
                 "pack_int4_weights: twos ", twos, " and out ", out, " must be 4-byte aligned");
  const auto in = static_cast<const uint8_t*>(twos);
  auto o = static_cast<uint8_t*>(out);
  const bool overlap = o < in + bytes && in < o + bytes;
  unsigned long long* first = nullptr;
  uint8_t* tmp = nullptr;  // the packing's destination where `out` overlaps `twos` (a permutation is not in place)
  ok(cudaMalloc(&first, sizeof *first), "cudaMalloc (pack_int4_weights)");
  unsigned long long found = ~0ull;
  cudaError_t e = cudaMemcpyAsync(first, &found, sizeof found, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = launch_int4_find_minus8(in, bytes, first, stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(&found, first, sizeof found, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  const cudaError_t f = cudaFree(first);
  ok(e, "int4 -8 search (pack_int4_weights)");
  ok(f, "cudaFree (pack_int4_weights)");
  const size_t per_elems = size_t(rows) * K;
  XSTAGE_REQUIRE(found == ~0ull, "pack_int4_weights: matrix ", found / per_elems, " element (",
                 found % per_elems / size_t(K), ", ", found % size_t(K),
                 ") is -8, which the packed sign-magnitude form cannot hold (quantize_int4 gives [-7, 7])");
  if (overlap) ok(cudaMalloc(&tmp, bytes), "cudaMalloc (pack_int4_weights: the packing of overlapping buffers)");
  e = launch_int4_pack_frag(in, overlap ? tmp : o, matrices, rows, K, stream);
  if (e == cudaSuccess && overlap) e = cudaMemcpyAsync(o, tmp, bytes, cudaMemcpyDeviceToDevice, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  const cudaError_t t = tmp ? cudaFree(tmp) : cudaSuccess;
  ok(e, "int4 packing (pack_int4_weights)");
  ok(t, "cudaFree (pack_int4_weights)");
}

int moe_l2_cols(const MoeLayerParams& prm) {
  if (prm.l2_cols != 0) return prm.l2_cols;
  // 256 only where CTA pairs stay possible (an even count of 256-column tiles): the shapes it was measured on (s24).
  // Where hidden / 128 is odd (DiT-MoE-XL's 1152) 256 runs with a ragged last tile, measured slower than 128 at 2K-16K
  // tokens and with W4A8 or the Interleaved order, faster only for W8A8 Expert-Wave from ~24K tokens (docs/MOE.md,
  // "Session 54"): there an explicit l2_cols 256.
  return prm.weights != MoeWeightFormat::kBf16 && prm.shape.hidden % 512 == 0 ? 256 : 128;
}

namespace {

// CTAs per rank and CTAs per cluster of a launch (MoeLayerParams::ctas_per_rank and ::cluster, resolved).
struct LaunchShape {
  int ctas = 0, cluster = 1;
  int share = 0;  // MoeLayerParams::pair_share resolved (0 with single CTAs)
};
// pair_share for a launch with CTA pairs (check_params names a bad explicit value).
int resolve_pair_share(runtime::Team& team, const MoeLayerParams& prm) {
  if (prm.pair_share != kPairShareAuto) return prm.pair_share;
  if (prm.weights == MoeWeightFormat::kBf16 || (prm.order == MoeOrder::kInterleaved && prm.lead == 1))
    return kPairShareA;
  // One expert's Linear-1 weights against the L2: beyond a third or so of it, the expert's row tiles running at once
  // read them from DRAM more than once (s26: 35.0 GB of reads for 25.9 GB of data on DeepSeek-V4-Pro at 8K tokens).
  int l2 = 0;
  ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, team.device()), "cudaDeviceGetAttribute (L2 size)");
  // (W4A8: half a byte per weight, read as int4)
  const double w1_bytes = (prm.weights == MoeWeightFormat::kInt4 ? 1.0 : 2.0) * prm.shape.inter * prm.shape.hidden;
  return w1_bytes > kPairShareWeightsL2Fraction * l2 ? kPairShareWeights : kPairShareA;
}
LaunchShape launch_shape(runtime::Team& team, const MoeLayerParams& prm) {
  const int ranks = team.local_ranks();
  const int l2_cols = moe_l2_cols(prm);
  const int n1 = prm.shape.inter / kBlockN, n2 = moe_l2_tiles(prm.shape.hidden, l2_cols);  // N tiles
  XSTAGE_REQUIRE(prm.cluster >= 0 && prm.cluster <= 2, "moe layer: cluster must be 0 (auto), 1 or 2 CTAs, got ",
                 prm.cluster);
  if (prm.cluster == 2)
    XSTAGE_REQUIRE(n1 % 2 == 0 && n2 % 2 == 0, "moe layer: CTA pairs take N tiles 2j and 2j + 1: they need even N-tile counts, but "
                   "Linear-1 has ", n1, " (inter ", prm.shape.inter, " / 128) and Linear-2 ", n2, " (hidden ",
                   prm.shape.hidden, " in tiles of ", l2_cols, " columns)");
  LaunchShape ls;
  // auto = CTA pairs wherever both N-tile counts are even (and a given ctas_per_rank is even), else single CTAs
  // (DiT-MoE-XL: H / 128 = 9). Once the mainloop no longer bound itself by its instruction issue (uniform wgmma
  // descriptors), pairs measured 0.97-1.03x of single CTAs with Expert-Wave and 1.03-1.13x with Interleaved at P = 1
  // (W8A8, results/moe/runs/s22/call7; before that change they were 1-10 % slower everywhere: docs/MOE.md).
  const bool pairs_fit = n1 % 2 == 0 && n2 % 2 == 0 && (prm.ctas_per_rank <= 0 || prm.ctas_per_rank % 2 == 0);
  ls.cluster = prm.cluster == 0 ? (pairs_fit ? 2 : 1) : prm.cluster;
  ls.ctas = prm.ctas_per_rank > 0 ? prm.ctas_per_rank : team.sms_per_rank();
  XSTAGE_REQUIRE(ls.ctas >= 1 && ls.ctas * ranks <= team.sm_count(), "moe layer: ", ls.ctas, " CTAs per rank x ",
                 ranks, " local ranks exceed the ", team.sm_count(), " SMs (one CTA per SM; all must be resident)");
  if (ls.cluster == 2) {
    // Pairs never straddle two ranks (blocks 2i, 2i + 1 of one rank), and every pair must be resident at once.
    int resident = 0;
    ok(max_resident_pairs(prm.order, prm.weights, prm.trace, &resident), "cudaOccupancyMaxActiveClusters");
    const int pair_ctas = prm.ctas_per_rank > 0 ? ls.ctas : std::min(ls.ctas - ls.ctas % 2, 2 * (resident / ranks));
    if (prm.cluster == 0 && (pair_ctas < 2 || ranks * pair_ctas / 2 > resident)) {
      ls.cluster = 1;  // auto: pairs do not fit this launch; single CTAs do
      return ls;
    }
    ls.share = resolve_pair_share(team, prm);
    XSTAGE_REQUIRE(prm.ctas_per_rank <= 0 || ls.ctas % 2 == 0, "moe layer: CTA pairs need an even ctas_per_rank, got ",
                   ls.ctas);
    ls.ctas = pair_ctas;
    XSTAGE_REQUIRE(ls.ctas >= 2 && ranks * ls.ctas / 2 <= resident, "moe layer: ", ranks * ls.ctas / 2,
                   " CTA pairs (", ls.ctas, " CTAs per rank x ", ranks, " local ranks) exceed the ", resident,
                   " pairs this GPU can hold at once");
  }
  return ls;
}

}  // namespace

struct MoeWorkspace::Prepared {
  bool device_plan;                                     // the tables were made on the device (moe_plan.hpp)
  size_t o_counts, o_base, o_off, o_tok, o_idx, o_pos;  // int32 offsets of the tables in tables_
  size_t tk;                                            // entries per local rank of the index and pos tables
  std::vector<int> tokens;                              // the call's tokens per local rank (MoeRankInputs::tokens)
  std::vector<long long> rows;                          // host plan, per local rank: its tile rows (trace capacity)
  std::vector<size_t> o_order;                          // host plan, per local rank: sched::spread_row_order
};

namespace {
// The device plan's per-call records ([local ranks]) and its sticky error, in MoeWorkspace::plan_state_.
MoePlanRecord* plan_records(void* state) { return static_cast<MoePlanRecord*>(state); }
MoePlanError* plan_error(void* state, int ranks) {
  return reinterpret_cast<MoePlanError*>(static_cast<MoePlanRecord*>(state) + ranks);
}
// The signals expected per source so far, by slot (kSlotDispatch, kSlotCombine, kSlotPlan), after the error record.
uint32_t* plan_epochs(void* state, int ranks) { return reinterpret_cast<uint32_t*>(plan_error(state, ranks) + 1); }
}  // namespace

int moe_lead_knee(int ctas, int inter) {
  // One round of Linear-1 tiles over the CTAs covers ctas / (inter / 128) rows (a tile is 128 h columns:
  // 128 gate + 128 up), so L2 tiles that trail by fewer rows find their rows unfinished (SPEC 5, D_knee,
  // with the kernel's 256-column L1 tile: docs/SCHEDULERS.md "auto").
  return std::max(1, (ctas * kBlockN + inter - 1) / inter);
}

const char* moe_kernel_build() {
#ifdef XSTAGE_MOE_FFMA_YIELD
  return "ffma-yield " XSTAGE_MOE_FFMA_YIELD;
#else
  return "";
#endif
}

std::string check_moe_shape(const MoeShape& s, int world) {
  if (world < 1 || world > runtime::kMaxRanks)
    return detail::concat("world size ", world, " is outside [1, ", runtime::kMaxRanks, "]");
  if (s.hidden < kBlockK || s.hidden % kBlockK != 0)
    return detail::concat("hidden = ", s.hidden, " must be a positive multiple of ", kBlockK, " (the FP8 block)");
  if (s.inter < kBlockK || s.inter % kBlockK != 0)
    return detail::concat("inter = ", s.inter, " must be a positive multiple of ", kBlockK, " (the FP8 block)");
  if (s.experts < 1 || s.experts % world != 0)
    return detail::concat("experts = ", s.experts, " must be a positive multiple of the world size ", world);
  if (s.topk < 1 || s.topk > s.experts)
    return detail::concat("topk = ", s.topk, " must be in [1, experts = ", s.experts, "]");
  if (s.tokens_per_rank < 1) return detail::concat("tokens_per_rank = ", s.tokens_per_rank, " must be >= 1");
  // The producer packs a tile's local expert in 11 bits and its N tile in 10 (moe_kernel.cuh, OwnRow): checked here,
  // where a layer is made, so that no layer is made that no call can run (launch checks them again).
  if (s.experts / world >= 2048)
    return detail::concat("experts = ", s.experts, " over ", world, " ranks is ", s.experts / world,
                          " per rank; at most 2047");
  if (s.hidden / kBlockN >= 1024 || s.inter / kBlockN >= 1024)
    return detail::concat("hidden = ", s.hidden, " and inter = ", s.inter, " must be below ", 1024 * kBlockN);
  const long long rows = moe::max_recv_rows(world, s.tokens_per_rank, s.topk, s.experts / world, kBlockM);
  // TMA coordinates are 32-bit signed: the row coordinate into a map of every local rank's rows (an emulated team
  // folds all `world` copies into one map) must stay below 2^31. Byte offsets are 64-bit everywhere (the limit was
  // rows x hidden < 2^31 until session 48, which kept Qwen3-235B, DeepSeek-V3, V4-Pro and GLM-Flash from 32768 tokens
  // per rank at EP = 2).
  if (rows * world >= (1LL << 31))
    return detail::concat("receive buffer of ", rows, " rows per rank x ", world,
                          " ranks exceeds the 2^31 rows a 32-bit TMA coordinate addresses");
  return "";
}

MoeWorkspace::MoeWorkspace(runtime::Team& team, const MoeShape& shape, MoeWeightFormat format)
    : team_(team), shape_(shape), bf16_(format == MoeWeightFormat::kBf16) {
  XSTAGE_REQUIRE(format == MoeWeightFormat::kFp8 || format == MoeWeightFormat::kInt4 || format == MoeWeightFormat::kBf16,
                 "moe layer: unknown weight format ", int(format), " for the workspace");
  if (const std::string why = check_moe_shape(shape, team.world()); !why.empty())
    throw UsageError("moe layer: " + why);
  const int P = team.world(), H = shape.hidden, I = shape.inter;
  const long long rows = moe::max_recv_rows(P, shape.tokens_per_rank, shape.topk, shape.experts / P, kBlockM);
  rows_cap_ = int((rows + kBlockM - 1) / kBlockM * kBlockM);
  const size_t R = size_t(rows_cap_), elem = bf16_ ? 2 : 1;  // bytes per element of the receive and h rows
  recv_x_ = team.alloc(round16(R * H * elem), "moe recv_x");
  if (!bf16_) recv_sa_ = team.alloc(round16(R * (H / kBlockK) * sizeof(float)), "moe recv_sa");
  recv_meta_ = team.alloc(round16(R * sizeof(RecvMeta)), "moe recv_meta");
  h_ = team.alloc(round16(R * I * elem), "moe h");
  if (!bf16_) h_scale_ = team.alloc(round16(R * (I / kBlockK) * sizeof(float)), "moe h_scale");
  row_ready_ = team.alloc(round16(R / kBlockM * sizeof(uint32_t)), "moe row_ready");
  combine_ = team.alloc(round16(size_t(shape.tokens_per_rank) * shape.topk * H * 2), "moe combine");
  plan_counts_ = team.alloc(round16(size_t(P) * shape.experts * sizeof(int32_t)), "moe plan counts");
  signals_ = std::make_unique<runtime::SignalSet>(team, 3, "moe signals");  // dispatch, combine, plan
  ok(cudaMalloc(&err_, sizeof(MoeDeviceError)), "cudaMalloc (error record)");
  runtime::zero_now(err_, sizeof(MoeDeviceError), team.first_rank());
  const size_t plan_bytes = team.local_ranks() * sizeof(MoePlanRecord) + sizeof(MoePlanError) + 4 * sizeof(uint32_t);
  ok(cudaMalloc(&plan_state_, plan_bytes), "cudaMalloc (plan records)");
  runtime::zero_now(plan_state_, plan_bytes, team.first_rank());
}

MoeWorkspace::~MoeWorkspace() {
  if (trace_) cudaFree(trace_);
  if (err_) cudaFree(err_);
  if (plan_state_) cudaFree(plan_state_);
  if (tables_) cudaFree(tables_);
}

void MoeWorkspace::check(runtime::Team& team, const std::string& what, cudaStream_t stream) {
  // The layer's stream; team.check below waits for the team's. Bounded: every wait of the kernel on another CTA or rank
  // gives up after the team's timeout, but a call whose peers never come may spend it once per waiting tile (the
  // waits run one after another), so this can take a multiple of the timeout before it reports. Waits within a CTA
  // pair (the multicast stages) have no timeout: they depend on the pair's lockstep tile walks, not on a peer.
  ok(cudaStreamSynchronize(stream), "stream synchronize");
  MoePlanError pe{};  // a device plan's rejected routing (the root cause of anything else this call did)
  MoePlanError* pe_dev = plan_error(plan_state_, team.local_ranks());
  ok(cudaMemcpy(&pe, pe_dev, sizeof pe, cudaMemcpyDeviceToHost), "cudaMemcpy (plan error)");
  if (pe.code != 0) {
    runtime::zero_now(pe_dev, sizeof pe, team.first_rank());
    throw UsageError(what + ": " +
                     moe::topk_entry_error(pe.rank, pe.token, pe.slot, pe.value, shape_.experts, pe.code == 2 ? pe.repeats : -1));
  }
  MoeDeviceError e{};
  ok(cudaMemcpy(&e, err_, sizeof e, cudaMemcpyDeviceToHost), "cudaMemcpy (error record)");
  if (e.code != 0) {
    runtime::zero_now(err_, sizeof e, team.first_rank());
    throw RuntimeError(detail::concat(what, ": rank ", e.rank, ": timed out waiting for the Linear-1 tiles of row ",
                                      e.peer_or_row, " (saw ", e.got, " of ", e.expected, ")"));
  }
  team.check(what);
}

std::vector<MoeTileTrace> MoeWorkspace::read_trace(runtime::Team& team) const {
  XSTAGE_REQUIRE(trace_ != nullptr && trace_ctas_ > 0, "moe layer: no traced launch (set MoeLayerParams::trace)");
  ok(cudaStreamSynchronize(team.stream()), "stream synchronize");
  std::vector<uint64_t> w(size_t(trace_ctas_) * trace_cap_ * kTraceWords);
  ok(cudaMemcpy(w.data(), trace_, w.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost), "cudaMemcpy (trace)");
  std::vector<MoeTileTrace> out;
  for (int b = 0; b < trace_ctas_; ++b)
    for (int i = 0; i < trace_cap_; ++i) {
      const uint64_t* r = w.data() + (size_t(b) * trace_cap_ + i) * kTraceWords;
      if (r[kTrMmaStart] == 0) break;  // the CTA's tiles end here
      MoeTileTrace t;
      t.rank = b / trace_ctas_per_rank_;
      t.cta = b % trace_ctas_per_rank_;
      t.index = i;
      t.l2 = (r[kTrTile] >> 63) != 0;
      t.half = ((r[kTrTile] >> 62) & 1) != 0;
      t.expert = int((r[kTrTile] >> 40) & 0x3FFFFF);
      t.row = int((r[kTrTile] >> 16) & 0xFFFFFF);
      t.n = int(r[kTrTile] & 0xFFFF);
      t.mma_start_ns = r[kTrMmaStart];
      t.mma_end_ns = r[kTrMmaEnd];
      t.mma_cycles = r[kTrMmaCycles];
      t.slot_wait_cycles = r[kTrSlotWait];
      t.epi_start_ns = r[kTrEpiStart];
      t.epi_read_cycles = r[kTrEpiRead];
      t.epi_done_cycles = r[kTrEpiDone];
      t.first_wait_cycles = r[kTrFirstWait];
      t.full_wait_cycles = r[kTrFullWait];
      out.push_back(t);
    }
  return out;
}

MoeWorkspace::PlanTables MoeWorkspace::read_plan_tables(cudaStream_t stream) const {
  XSTAGE_REQUIRE(prepared_ != nullptr, "moe layer: no prepared routing to read the tables of");
  ok(cudaStreamSynchronize(stream), "stream synchronize");
  const Prepared& pr = *prepared_;
  const int P = team_.world(), ranks = team_.local_ranks(), E = shape_.experts, El = E / P;
  const size_t TK = pr.tk;
  auto read = [&](size_t at, size_t n) {
    std::vector<int32_t> v(n);
    ok(cudaMemcpy(v.data(), static_cast<const int32_t*>(tables_) + at, n * sizeof(int32_t), cudaMemcpyDeviceToHost),
       "cudaMemcpy (plan tables)");
    return v;
  };
  PlanTables t;
  t.counts = read(pr.o_counts, size_t(P) * E);
  t.src_base = read(pr.o_base, size_t(P) * E);
  t.row_offset = read(pr.o_off, size_t(P) * (El + 1));
  t.tokens = read(pr.o_tok, size_t(ranks) * El);
  t.index = read(pr.o_idx, ranks * TK);
  t.pos = read(pr.o_pos, ranks * TK);
  return t;
}

void MoeWorkspace::poison(cudaStream_t stream) {
  const int first = team_.first_rank(), ranks = team_.local_ranks();
  for (auto* b : {recv_x_.get(), recv_sa_.get(), recv_meta_.get(), h_.get(), h_scale_.get(), combine_.get()}) {
    if (b == nullptr) continue;  // the scale buffers of a bf16 workspace
    for (int g = 0; g < ranks; ++g) ok(cudaMemsetAsync(b->local(first + g), 0xFF, b->bytes(), stream), "cudaMemsetAsync (poison)");
  }
  if (!team_.is_emulated()) {  // peers write into these buffers: nobody launches before every rank's poison is done
    ok(cudaStreamSynchronize(stream), "stream synchronize (poison)");
    team_.barrier();
  }
}

void MoeWorkspace::fill_receive(MoeReceiveFill what, cudaStream_t stream, uint32_t seed) {
  const int first = team_.first_rank(), ranks = team_.local_ranks();
  const size_t rows = size_t(rows_cap_), H = size_t(shape_.hidden);
  for (int g = 0; g < ranks; ++g) {
    const uint32_t s = seed * 2654435761u + 2u * uint32_t(first + g);  // another stream of values per rank and buffer
    if (what == MoeReceiveFill::kStale) {
      ok(launch_fill_random(recv_x_->local(first + g), rows * H, bf16_ ? 2 : 1, s, stream), "fill_receive (codes)");
      if (recv_sa_)
        ok(launch_fill_random(recv_sa_->local(first + g), rows * (H / kBlockK), 4, s + 1, stream), "fill_receive (scales)");
    } else {
      const int byte = what == MoeReceiveFill::kNaN ? 0xFF : 0;
      ok(cudaMemsetAsync(recv_x_->local(first + g), byte, recv_x_->bytes(), stream), "cudaMemsetAsync (fill_receive)");
      if (recv_sa_) ok(cudaMemsetAsync(recv_sa_->local(first + g), byte, recv_sa_->bytes(), stream), "cudaMemsetAsync (fill_receive)");
    }
  }
  if (!team_.is_emulated()) {  // as poison: peers dispatch into these buffers
    ok(cudaStreamSynchronize(stream), "stream synchronize (fill_receive)");
    team_.barrier();
  }
}

MoeWorkspace::ReceiveRows MoeWorkspace::read_receive(cudaStream_t stream) const {
  ok(cudaStreamSynchronize(stream), "stream synchronize");
  const int first = team_.first_rank(), ranks = team_.local_ranks();
  const size_t rows = size_t(rows_cap_), H = size_t(shape_.hidden), row_bytes = H * (bf16_ ? 2 : 1);
  ReceiveRows r;
  r.codes.resize(size_t(ranks) * rows * row_bytes);
  if (recv_sa_) r.scales.resize(size_t(ranks) * rows * (H / kBlockK));
  for (int g = 0; g < ranks; ++g) {
    ok(cudaMemcpy(r.codes.data() + size_t(g) * rows * row_bytes, recv_x_->local(first + g), rows * row_bytes,
                  cudaMemcpyDeviceToHost),
       "cudaMemcpy (receive rows)");
    if (recv_sa_)
      ok(cudaMemcpy(r.scales.data() + size_t(g) * rows * (H / kBlockK), recv_sa_->local(first + g),
                    rows * (H / kBlockK) * sizeof(float), cudaMemcpyDeviceToHost),
         "cudaMemcpy (receive row scales)");
  }
  return r;
}

// Everything prepare and launch both need valid (the routing is prepare's).
void MoeWorkspace::check_params(runtime::Team& team, const MoeLayerParams& prm) const {
  const MoeShape& s = prm.shape;
  const int P = team.world(), ranks = team.local_ranks(), first = team.first_rank();
  if (const std::string why = check_moe_shape(s, P); !why.empty()) throw UsageError("moe layer: " + why);
  const MoeShape& w = shape();
  XSTAGE_REQUIRE(s.hidden == w.hidden && s.inter == w.inter && s.experts == w.experts && s.topk == w.topk &&
                     s.tokens_per_rank == w.tokens_per_rank,
                 "moe layer: params shape (hidden ", s.hidden, ", inter ", s.inter, ", experts ", s.experts, ", topk ",
                 s.topk, ", tokens ", s.tokens_per_rank, ") differs from the workspace's (hidden ", w.hidden, ", inter ",
                 w.inter, ", experts ", w.experts, ", topk ", w.topk, ", tokens ", w.tokens_per_rank, ")");
  XSTAGE_REQUIRE(&team_ == &team, "moe layer: the workspace belongs to another team");
  auto aligned16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  XSTAGE_REQUIRE(prm.weights == MoeWeightFormat::kFp8 || prm.weights == MoeWeightFormat::kInt4 ||
                     prm.weights == MoeWeightFormat::kBf16,
                 "moe layer: unknown weight format ", int(prm.weights));
  const bool bf16 = prm.weights == MoeWeightFormat::kBf16;
  const char* format_name = bf16 ? "kBf16" : prm.weights == MoeWeightFormat::kInt4 ? "kInt4" : "kFp8";
  XSTAGE_REQUIRE(bf16 == bf16_, "moe layer: weights = ", format_name, " needs a workspace with ",
                 bf16 ? "bf16" : "FP8", " receive and h rows, but this one was built for ",
                 bf16_ ? "kBf16 (bf16 rows)" : "kFp8 / kInt4 (FP8 rows)", ": construct it as MoeWorkspace(team, shape, ",
                 bf16 ? "MoeWeightFormat::kBf16)" : "MoeWeightFormat::kFp8)");
  for (int g = 0; g < ranks; ++g) {
    const MoeRankInputs& in = prm.rank[g];
    const int r = first + g;
    XSTAGE_REQUIRE(in.tokens >= -1 && in.tokens <= w.tokens_per_rank, "moe layer: local rank ", r, ": tokens = ",
                   in.tokens, " is outside [0, ", w.tokens_per_rank, "] (the workspace's tokens per rank; -1: all of them)");
    if (in.tokens == 0) continue;  // a rank without tokens this call: its tensors are not read (empty ones may be null)
    if (bf16) {
      XSTAGE_REQUIRE(in.x && in.topk_weight && in.out, "moe layer: local rank ", r,
                     ": x, topk_weight and out must all be set");
      XSTAGE_REQUIRE(in.x_scale == nullptr, "moe layer: local rank ", r,
                     ": x_scale must be null for bf16 activations (weights = kBf16 has no scales)");
    } else {
      XSTAGE_REQUIRE(in.x && in.x_scale && in.topk_weight && in.out, "moe layer: local rank ", r,
                     ": x, x_scale, topk_weight and out must all be set");
    }
    XSTAGE_REQUIRE(aligned16(in.x), "moe layer: local rank ", r, ": x must be 16-byte aligned");
    // the weighted sum stores 16 bytes at a time; the dispatch and the sum read the scales and weights as floats
    XSTAGE_REQUIRE(aligned16(in.out), "moe layer: local rank ", r, ": out must be 16-byte aligned");
    XSTAGE_REQUIRE(reinterpret_cast<uintptr_t>(in.x_scale) % alignof(float) == 0 &&
                       reinterpret_cast<uintptr_t>(in.topk_weight) % alignof(float) == 0,
                   "moe layer: local rank ", r, ": x_scale and topk_weight must be 4-byte aligned (float)");
  }
  if (bf16) {
    XSTAGE_REQUIRE(prm.w1 && prm.w2, "moe layer: w1 and w2 must be set");
    XSTAGE_REQUIRE(prm.w1_scale == nullptr && prm.w2_scale == nullptr, "moe layer: w1_scale and w2_scale must be null ",
                   "for bf16 weights (weights = kBf16 has no scales); got w1_scale ",
                   prm.w1_scale ? "set" : "null", ", w2_scale ", prm.w2_scale ? "set" : "null");
  } else {
    XSTAGE_REQUIRE(prm.w1 && prm.w1_scale && prm.w2 && prm.w2_scale, "moe layer: w1, w1_scale, w2, w2_scale must be set");
  }
  XSTAGE_REQUIRE(aligned16(prm.w1) && aligned16(prm.w2), "moe layer: w1 and w2 must be 16-byte aligned (TMA)");
  XSTAGE_REQUIRE(!prm.trace || prm.weights == MoeWeightFormat::kFp8,
                 "moe layer: the per-tile trace is compiled for W8A8 only (weights = ", format_name, " was given)");
  if (prm.weights == MoeWeightFormat::kInt4)
    XSTAGE_REQUIRE(aligned16(prm.w1_scale) && aligned16(prm.w2_scale),
                   "moe layer: W4A8 weight scales must be 16-byte aligned (TMA)");
  XSTAGE_REQUIRE(prm.order == MoeOrder::kExpertWave || prm.order == MoeOrder::kInterleaved,
                 "moe layer: unknown tile order ", int(prm.order));
  XSTAGE_REQUIRE(prm.experts_per_wave >= 0, "moe layer: experts_per_wave must be >= 0 (0: waves that fill the SMs), got ",
                 prm.experts_per_wave);
  XSTAGE_REQUIRE(prm.wave_lag == 0 || prm.wave_lag == 1, "moe layer: wave_lag must be 0 or 1, got ", prm.wave_lag);
  XSTAGE_REQUIRE(prm.lead >= 0, "moe layer: the interleaved lead D must be >= 1 (the kernel waits on Linear-1 rows in "
                 "order), or 0 for D_knee; got ", prm.lead);
  XSTAGE_REQUIRE(prm.l2_prefetch >= 0 && prm.l2_prefetch <= 64,
                 "moe layer: l2_prefetch must be in [0, 64] K blocks (0: off), got ", prm.l2_prefetch);
  XSTAGE_REQUIRE(prm.pingpong == 0 || prm.pingpong == 1, "moe layer: pingpong must be 0 or 1, got ", prm.pingpong);
  XSTAGE_REQUIRE(prm.l2_scratches == 1 || prm.l2_scratches == 2, "moe layer: l2_scratches must be 1 or 2, got ",
                 prm.l2_scratches);
  XSTAGE_REQUIRE(prm.l2_borrow == 0 || prm.l2_borrow == 1, "moe layer: l2_borrow must be 0 or 1, got ", prm.l2_borrow);
  XSTAGE_REQUIRE(prm.early_release == 0 || prm.early_release == 1, "moe layer: early_release must be 0 or 1, got ",
                 prm.early_release);
  XSTAGE_REQUIRE(prm.zero_padding == 0 || prm.zero_padding == 1, "moe layer: zero_padding must be 0 or 1, got ",
                 prm.zero_padding);
  XSTAGE_REQUIRE(prm.row_order == 0 || prm.row_order == 1, "moe layer: row_order must be 0 or 1, got ", prm.row_order);
  XSTAGE_REQUIRE(prm.l2_prefetch_streamed == 0 || prm.l2_prefetch_streamed == 1,
                 "moe layer: l2_prefetch_streamed must be 0 or 1, got ", prm.l2_prefetch_streamed);
  XSTAGE_REQUIRE(prm.half_together == 0 || prm.half_together == 1, "moe layer: half_together must be 0 or 1, got ",
                 prm.half_together);
  XSTAGE_REQUIRE(prm.half_wide == 0 || prm.half_wide == 1, "moe layer: half_wide must be 0 or 1, got ", prm.half_wide);
  XSTAGE_REQUIRE(prm.lean == 0 || prm.lean == 1, "moe layer: lean must be 0 or 1, got ", prm.lean);
  XSTAGE_REQUIRE(prm.a_trim == 0 || prm.a_trim == 1, "moe layer: a_trim must be 0 or 1, got ", prm.a_trim);
  XSTAGE_REQUIRE(prm.merge_loads == 0 || prm.merge_loads == 1, "moe layer: merge_loads must be 0 or 1, got ",
                 prm.merge_loads);
  XSTAGE_REQUIRE(prm.l2_cols == 0 || prm.l2_cols == 128 || prm.l2_cols == 256,
                 "moe layer: l2_cols must be 0 (auto), 128 or 256, got ", prm.l2_cols);
  const int l2_cols = moe_l2_cols(prm);
  XSTAGE_REQUIRE(l2_cols == 128 || prm.weights != MoeWeightFormat::kBf16,
                 "moe layer: l2_cols 256 is for W8A8 and W4A8 (bf16 reference runs use 128-column Linear-2 tiles)");
  XSTAGE_REQUIRE(prm.l2_hints >= 0 && prm.l2_hints <= kHintAll, "moe layer: l2_hints must be a set of MoeL2Hint bits in [0, ",
                 int(kHintAll), "], got ", prm.l2_hints);
  const LaunchShape ls = launch_shape(team, prm);  // CTAs and pairs: named errors
  // The producer packs a tile's local expert in 11 bits and its N tile in 10 (moe_kernel.cuh, OwnRow).
  XSTAGE_REQUIRE(s.experts / P < 2048, "moe layer: at most 2047 experts per rank, got ", s.experts / P, " (", s.experts,
                 " experts over ", P, " ranks)");
  XSTAGE_REQUIRE(s.hidden / kBlockN < 1024 && s.inter / kBlockN < 1024, "moe layer: hidden and inter must be below ",
                 1024 * kBlockN, ", got hidden ", s.hidden, ", inter ", s.inter);
  XSTAGE_REQUIRE(prm.pair_share >= kPairShareAuto && prm.pair_share <= kPairShareWeights,
                 "moe layer: pair_share must be 0 (auto), 1 (A), 2 (weights of full rows) or 3 (weights), got ",
                 prm.pair_share);
  if (prm.pair_share > kPairShareA) {
    XSTAGE_REQUIRE(ls.cluster == 2, "moe layer: pair_share ", prm.pair_share, " is an option of CTA pairs, but this "
                   "launch runs single CTAs (cluster ", prm.cluster, ")");
    XSTAGE_REQUIRE(prm.weights != MoeWeightFormat::kBf16, "moe layer: pair_share ", prm.pair_share,
                   " is for W8A8 and W4A8 (weights = ", format_name, ")");
    XSTAGE_REQUIRE(prm.order != MoeOrder::kInterleaved || prm.lead != 1, "moe layer: pair_share ", prm.pair_share,
                   " needs the interleaved lead D >= 2 (a Linear-2 tile may compute the next row), got 1");
  }
  auto back_to_back = [](const std::unique_ptr<runtime::SymmetricBuffer>& b) {
    return b == nullptr || b->emulated_stride() == b->bytes();  // null: a bf16 workspace's scale buffers
  };
  if (ranks > 1)
    XSTAGE_CHECK(back_to_back(recv_x_) && back_to_back(h_) && back_to_back(recv_sa_) && back_to_back(h_scale_) &&
                     back_to_back(row_ready_),
                 "moe layer: emulated copies are not back to back");

}

namespace {
// A host plan reads the routing on the host: a CUDA graph would replay the routing of its capture. Refused by name.
void refuse_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  ok(cudaStreamIsCapturing(stream, &cs), "cudaStreamIsCapturing");
  XSTAGE_REQUIRE(cs == cudaStreamCaptureStatusNone, "moe layer: the stream is capturing a CUDA graph, but a host plan "
                 "(topk_index_all) reads the routing on the host, which a replay would not read again; capture a call "
                 "with the routing on the device (each rank's topk_index)");
}

// The call's tokens of each local rank (MoeRankInputs::tokens, -1: the workspace's T); check_params validated them.
std::vector<int> call_tokens(const runtime::Team& team, const MoeLayerParams& prm) {
  std::vector<int> n(size_t(team.local_ranks()));
  for (size_t g = 0; g < n.size(); ++g) n[g] = prm.rank[g].tokens < 0 ? prm.shape.tokens_per_rank : prm.rank[g].tokens;
  return n;
}

}  // namespace

// prepare_moe_layer for a routing in device memory (moe_plan.hpp): the same tables as the host plan's, at the same
// offsets, made on `stream`.
void prepare_device_plan(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& prm, cudaStream_t stream) {
  const MoeShape& s = prm.shape;
  const int P = team.world(), ranks = team.local_ranks(), first = team.first_rank();
  const int T = s.tokens_per_rank, K = s.topk, E = s.experts, El = E / P;
  XSTAGE_REQUIRE(prm.row_order == 0 || prm.weights != MoeWeightFormat::kFp8,
                 "moe layer: row_order 1 (the spread row order) is made on the host from the host plan; with a device "
                 "plan (topk_index per rank) use row_order 0, or pass topk_index_all");
  for (int g = 0; g < ranks; ++g)
    XSTAGE_REQUIRE(reinterpret_cast<uintptr_t>(prm.rank[g].topk_index) % alignof(int32_t) == 0, "moe layer: local rank ",
                   first + g, ": topk_index must be 4-byte aligned (int32)");
  // Tiles a scheduler may walk for the worst routing must fit its int positions (MoeLayoutStorage's check).
  const long long rows = ws.rows_capacity() / kBlockM;
  XSTAGE_REQUIRE(rows * (s.inter / kBlockN + s.hidden / kBlockN) < (1LL << 30), "moe layer: too many tiles (", rows,
                 " rows) for a device plan");
  const size_t o_counts = 0, o_base = size_t(P) * E, o_off = 2 * size_t(P) * E, o_tok = o_off + size_t(P) * (El + 1);
  const size_t tk = size_t(T) * K;  // index / pos entries per local rank (the capacity's: any call's count fits)
  const size_t o_idx = o_tok + size_t(ranks) * El, o_pos = o_idx + ranks * tk;
  const std::vector<int> tokens = call_tokens(team, prm);
  // The grid's chunks cover the local ranks' largest call (at least one CTA; a rank's chunks past its tokens count none).
  const int most = std::max(1, *std::max_element(tokens.begin(), tokens.end()));
  const int chunks = (most + kPlanChunkTokens - 1) / kPlanChunkTokens;
  const size_t o_hist = o_pos + ranks * tk;  // the plan's scratch, after the tables
  const size_t bytes = (o_hist + size_t(ranks) * chunks * E) * sizeof(int32_t);
  ws.prepared_.reset();  // a launch must not find the previous routing's plan if this one fails half-way
  int32_t* dt = static_cast<int32_t*>(grow(ws.tables_, ws.tables_bytes_, bytes, "tables"));
  PlanParams pp;
  pp.view = team.view();
  pp.topk = K;
  pp.experts = E;
  pp.b_m = kBlockM;
  pp.chunks = chunks;
  pp.hist = dt + o_hist;
  for (int g = 0; g < ranks; ++g) {
    pp.tokens[g] = tokens[g];
    pp.index[g] = prm.rank[g].topk_index;
    pp.idx_out[g] = dt + o_idx + g * tk;
    pp.pos_out[g] = dt + o_pos + g * tk;
  }
  pp.counts = ws.plan_counts_->peers();
  pp.signal = ws.signals_->table();
  pp.signal_slot = kSlotPlan;
  pp.t_counts = dt + o_counts;
  pp.t_base = dt + o_base;
  pp.t_off = dt + o_off;
  pp.t_tok = dt + o_tok;
  pp.rec = plan_records(ws.plan_state_);
  pp.err = plan_error(ws.plan_state_, ranks);
  ok(cudaMemsetAsync(pp.rec, 0x7F, ranks * sizeof(MoePlanRecord), stream), "cudaMemsetAsync (plan records)");  // kPlanClean
  pp.plan_epoch = plan_epochs(ws.plan_state_, ranks) + kSlotPlan;
  pp.timeout_ns = team.timeout_ns();
  pp.team_err = team.error_record();
  ok(launch_plan_counts(pp, stream), "device plan: counts");
  ok(launch_plan_tables(pp, stream), "device plan: tables");
  ws.prepared_ = std::make_unique<MoeWorkspace::Prepared>(
      MoeWorkspace::Prepared{true, o_counts, o_base, o_off, o_tok, o_idx, o_pos, tk, tokens, {}, {}});
}

void prepare_moe_layer(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& prm, cudaStream_t stream) {
  ws.check_params(team, prm);
  const MoeShape& s = prm.shape;
  const int P = team.world(), ranks = team.local_ranks(), first = team.first_rank();
  int given = 0, needed = 0;  // local ranks with a device routing; those with tokens, which need one
  for (int g = 0; g < ranks; ++g) {
    given += prm.rank[g].topk_index != nullptr ? 1 : 0;
    needed += prm.rank[g].tokens != 0 ? 1 : 0;
  }
  if (prm.topk_index_all == nullptr) {
    for (int g = 0; g < ranks; ++g)
      XSTAGE_REQUIRE(prm.rank[g].topk_index != nullptr || prm.rank[g].tokens == 0,
                     "moe layer: no routing: set every local rank's topk_index (device memory: the plan is made on the "
                     "device) or topk_index_all (every rank's, host memory); ", given, " of ", needed,
                     " local ranks with tokens have a topk_index (local rank ", first + g, " has none)");
    prepare_device_plan(team, ws, prm, stream);
    return;
  }
  XSTAGE_REQUIRE(given == 0, "moe layer: the routing is given twice: topk_index_all (host) and the topk_index of ", given,
                 " local rank(s) (device); set one of them");
  refuse_capture(stream);
  // ---- routing -> dispatch plan (validates every index: rank, token, slot, value)
  const std::vector<int> tokens = call_tokens(team, prm);
  for (int g = 1; g < ranks; ++g)
    XSTAGE_REQUIRE(tokens[g] == tokens[0], "moe layer: a host plan (topk_index_all, [world][tokens][k]) needs the same "
                   "token count on every rank, but local rank ", first, " passes ", tokens[0], " and local rank ",
                   first + g, " passes ", tokens[g], "; give each rank's topk_index (the device plan) instead");
  const int T = tokens[0], K = s.topk, H = s.hidden, I = s.inter;
  // (no combine map: the kernel finds each row's way back from its (source, token, slot) itself)
  moe::DispatchPlan plan(std::vector<int32_t>(prm.topk_index_all, prm.topk_index_all + size_t(P) * T * K), T, K,
                         moe::make_placement(s.experts, P), kBlockM, /*combine_map=*/false);
  for (int g = 0; g < ranks; ++g)
    XSTAGE_REQUIRE(plan.recv_rows(first + g) <= ws.rows_capacity(), "moe layer: rank ", first + g, " receives ",
                   plan.recv_rows(first + g), " rows, more than the workspace's ", ws.rows_capacity());

  // ---- device tables, one allocation: counts [P][E], src_base [P][E], row_offset [P][El+1],
  //      tokens [ranks][El], index [ranks][T][K], pos [ranks][T][K]
  std::vector<int32_t>& tab = ws.host_tables_;
  tab.clear();
  auto put = [&](const std::vector<int>& v) {
    const size_t at = tab.size();
    tab.insert(tab.end(), v.begin(), v.end());
    return at;
  };
  const size_t o_counts = put(plan.counts()), o_base = put(plan.src_base()), o_off = put(plan.row_offsets());
  std::vector<int> tok;
  for (int g = 0; g < ranks; ++g) {
    const std::vector<int> lt = plan.local_tokens(first + g);
    tok.insert(tok.end(), lt.begin(), lt.end());
  }
  const size_t o_tok = put(tok);
  // index [ranks][T][K] and pos [ranks][T][K]: the local ranks' slices of the plan's [P][T][K] tables
  const size_t slice = size_t(T) * K, o_idx = tab.size();
  tab.insert(tab.end(), plan.index().begin() + first * slice, plan.index().begin() + (first + ranks) * slice);
  const size_t o_pos = tab.size();
  tab.insert(tab.end(), plan.positions().begin() + first * slice, plan.positions().begin() + (first + ranks) * slice);
  // The spread row order of every local rank's layout (MoeLayerParams::row_order 1 walks it; cheap, so always made).
  std::vector<long long> rows;
  std::vector<size_t> o_order;
  for (int g = 0; g < ranks; ++g) {
    const sched::MoeLayoutStorage layout = plan.layout(first + g, I / kBlockN, H / kBlockN);
    rows.push_back(layout.rows());
    o_order.push_back(put(sched::spread_row_order(layout.view())));
  }
  const size_t bytes = tab.size() * sizeof(int32_t);
  grow(ws.tables_, ws.tables_bytes_, bytes, "tables");
  ok(cudaMemcpyAsync(ws.tables_, tab.data(), bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (tables)");
  ws.prepared_ = std::make_unique<MoeWorkspace::Prepared>(MoeWorkspace::Prepared{
      false, o_counts, o_base, o_off, o_tok, o_idx, o_pos, slice, tokens, std::move(rows), std::move(o_order)});
}

MoeOrderAdvice advise_moe_order(const model::Platform& mx, const MoeLayerParams& prm, int world, int ctas,
                                double l2_bytes, moe::RoutingKind routing, std::uint64_t seed, double rate_per_sm) {
  const MoeShape& s = prm.shape;
  MoeOrderAdvice a;
  moe::OrderQuery& q = a.query;
  q.hidden = s.hidden;
  q.inter = s.inter;
  q.experts = s.experts;
  q.topk = s.topk;
  q.tokens = s.tokens_per_rank;
  q.world = world;
  q.weight_bytes = prm.weights == MoeWeightFormat::kInt4 ? 0.5 : prm.weights == MoeWeightFormat::kBf16 ? 2 : 1;
  q.l1_cols = 2 * kBlockN;  // the kernel's Linear-1 tile: 128 gate + 128 up columns
  q.l2_cols = moe_l2_cols(prm);
  q.sms = ctas;
  q.l2_bytes = l2_bytes;
  q.routing = routing;
  const moe::MmaTimes mt = moe::estimate_mma_times(q, rate_per_sm);  // W4A8 computes at the FP8 rate
  q.t_l1_mma = mt.t_l1;
  q.t_l2_mma = mt.t_l2;
  // The simulator at the kernel's lead and epilogue slots (W4A8 stages two); nothing in it is fitted to measurements.
  try {
    const moe::SimOrders so = moe::simulate_orders(mx, q, moe_lead_knee(ctas, s.inter),
                                                   prm.weights == MoeWeightFormat::kInt4 ? 2 : 1, seed, rate_per_sm);
    q.sim_wave_s = so.wave_us * 1e-6;
    q.sim_interleaved_s = so.interleaved_us * 1e-6;
    q.sim_wave_lag_s = so.wave_lag_us * 1e-6;
    q.sim_interleaved_all_s = so.interleaved_all_us * 1e-6;
  } catch (const std::exception& e) {
    a.sim_error = e.what();
  }
  a.choice = moe::choose_moe_order(mx, q);
  return a;
}

int moe_launch_ctas(runtime::Team& team, const MoeLayerParams& prm, int* cluster) {
  const LaunchShape ls = launch_shape(team, prm);
  if (cluster) *cluster = ls.cluster;
  return ls.ctas;
}

int moe_pair_share(runtime::Team& team, const MoeLayerParams& prm) { return launch_shape(team, prm).share; }

void launch_moe_layer(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& prm, cudaStream_t stream) {
  XSTAGE_REQUIRE(ws.prepared_ != nullptr, "moe layer: launch before prepare (no routing uploaded)");
  ws.check_params(team, prm);
  const MoeShape& s = prm.shape;
  const int P = team.world(), ranks = team.local_ranks(), first = team.first_rank();
  const int K = s.topk, El = s.experts / P, H = s.hidden, I = s.inter;
  const int n2 = moe_l2_tiles(H, moe_l2_cols(prm));  // L2 tiles per row (128 or 256 output columns; the last ragged)
  const MoeWorkspace::Prepared& pr = *ws.prepared_;
  // The tables are the prepared call's: its token counts, which this launch's tensors must hold.
  const std::vector<int> tokens = call_tokens(team, prm);
  for (int g = 0; g < ranks; ++g)
    XSTAGE_REQUIRE(tokens[g] == pr.tokens[g], "moe layer: local rank ", first + g, " launches with tokens = ",
                   tokens[g], ", but the routing was prepared for ", pr.tokens[g]);
  const bool device_plan = pr.device_plan;
  const size_t o_counts = pr.o_counts, o_base = pr.o_base, o_off = pr.o_off, o_tok = pr.o_tok, o_idx = pr.o_idx,
               o_pos = pr.o_pos;
  const LaunchShape ls = launch_shape(team, prm);
  const int ctas = ls.ctas;
  const int32_t* dt = static_cast<const int32_t*>(ws.tables_);

  // ---- TMA descriptors over the local ranks' folded buffers and the weights
  const uint64_t R = uint64_t(ws.rows_capacity());
  const uint64_t experts_here = uint64_t(ranks) * El;
  const bool int4 = prm.weights == MoeWeightFormat::kInt4, bf16 = prm.weights == MoeWeightFormat::kBf16;
  // (W4A8: the weight maps below see the int4 fragment layout; see `if (int4)` after them)
  const void* w1 = prm.w1;
  const void* w2 = prm.w2;
  CUtensorMap maps[18];
  const MapKind rows_kind = bf16 ? MapKind::kBf16 : MapKind::kFp8;  // receive rows, h and weights
  for (int i : {1, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17}) maps[i] = CUtensorMap{};
  const bool share_weights = ls.share > kPairShareA;  // CTA pairs sharing the weights
  make_map_2d(&maps[0], ws.recv_x_->local(first), rows_kind, H, uint64_t(ranks) * R, "recv_x", kBlockM / 2);
  if (!bf16) make_map_2d(&maps[1], ws.recv_sa_->local(first), MapKind::kF32, R, uint64_t(ranks) * (H / kBlockK), "recv_sa");
  if (!int4) make_map_2d(&maps[2], w1, rows_kind, H, experts_here * 2 * I, "w1");
  make_map_2d(&maps[3], ws.h_->local(first), rows_kind, I, uint64_t(ranks) * R, "h");
  make_map_2d(&maps[8], ws.h_->local(first), rows_kind, I, uint64_t(ranks) * R, "h (A operand)", kBlockM / 2);
  if (!bf16) make_map_2d(&maps[4], ws.h_scale_->local(first), MapKind::kF32, R, uint64_t(ranks) * (I / kBlockK), "h_scale");
  if (!int4) make_map_2d(&maps[5], w2, rows_kind, I, experts_here * H, "w2");
  if (!bf16 && prm.a_trim == 1) {  // 16-row A boxes: an expert's last row tile loads its valid rows rounded up to 16
    make_map_2d(&maps[11], ws.recv_x_->local(first), rows_kind, H, uint64_t(ranks) * R, "recv_x (16-row boxes)", 16);
    make_map_2d(&maps[12], ws.h_->local(first), rows_kind, I, uint64_t(ranks) * R, "h (16-row boxes)", 16);
  }
  if (!bf16 && prm.merge_loads == 1) {  // one load per stage operand where its boxes are adjacent (merge_loads)
    make_map_2d(&maps[13], ws.recv_x_->local(first), rows_kind, H, uint64_t(ranks) * R, "recv_x (128-row boxes)");
    // W1 ([experts][2I][H] codes: gate rows, then up rows) as {H, I, 2 experts}: box {128, 128, 2} at (k, 128 n, 2e)
    // is N tile n's gate box followed by its up box, the stage layout of the two 2-d loads.
    const cuuint64_t h64 = cuuint64_t(H), i64 = cuuint64_t(I);  // extents and byte strides in 64 bits
    const cuuint64_t w1_dims[3] = {h64, i64, 2 * cuuint64_t(experts_here)}, w1_strides[2] = {h64, i64 * h64};
    const cuuint32_t w1_box[3] = {128u, 128u, 2u};
    if (!int4) make_map_nd(&maps[14], w1, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, w1_dims, w1_strides, w1_box, true, "w1 (gate and up boxes)");
    if (!int4 && moe_l2_cols(prm) == 256) make_map_2d(&maps[15], w2, rows_kind, I, experts_here * H, "w2 (256-row boxes)", 256);
    if (int4) {  // the per-column group scales of the same boxes: gate and up ({I, 2, experts K/128}), 256 W2 columns
      const cuuint64_t s1_dims[3] = {i64, 2, cuuint64_t(experts_here) * (H / kBlockK)},
                       s1_strides[2] = {i64 * 4, 2 * i64 * 4};
      const cuuint32_t s1_box[3] = {128u, 2u, 1u};
      make_map_nd(&maps[16], prm.w1_scale, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, s1_dims, s1_strides, s1_box, false,
                  "w1_scale (int4, gate and up)");
      if (moe_l2_cols(prm) == 256) {
        const cuuint64_t s2_dims[2] = {h64, cuuint64_t(experts_here) * (I / kBlockK)}, s2_strides[1] = {h64 * 4};
        const cuuint32_t s2_box[2] = {256u, 1u};
        make_map_nd(&maps[17], prm.w2_scale, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, s2_dims, s2_strides, s2_box, false,
                    "w2_scale (int4, 256 columns)");
      }
    }
  }
  // Half weight boxes: each CTA of a weight-sharing pair loads rows [64 crank, +64) of every box into both; a half
  // Linear-1 tile with half_wide loads its gate and up boxes as 64-row halves, interleaved per warpgroup.
  if (!int4 && (share_weights || half_wide_on(prm)))
    make_map_2d(&maps[9], w1, rows_kind, H, experts_here * 2 * I, "w1 (half boxes)", kBlockN / 2);
  if (!int4 && share_weights) make_map_2d(&maps[10], w2, rows_kind, I, experts_here * H, "w2 (half boxes)", kBlockN / 2);
  if (int4) {
    make_map_2d(&maps[6], prm.w1_scale, MapKind::kF32, 2 * I, experts_here * (H / kBlockK), "w1_scale (int4)");
    make_map_2d(&maps[7], prm.w2_scale, MapKind::kF32, H, experts_here * (I / kBlockK), "w2_scale (int4)");
  }

  if (int4) {
    // W4A8: the weights in the fragment layout seen as rows of 256 bytes (a 4 KB block is 16 of them, no swizzle):
    // W1 in 8 KB boxes (two row blocks of one K block), W2 in 8 KB, 16 KB (a 256-column Linear-2 tile) and 4 KB (half
    // of a 128-column one, a weight-sharing pair's) boxes.
    auto frag_map = [&](CUtensorMap* m, const void* base, uint64_t bytes, uint32_t box_rows, const char* what) {
      const cuuint64_t dims[2] = {kInt4MapRow, bytes / kInt4MapRow}, strides[1] = {kInt4MapRow};
      const cuuint32_t box[2] = {kInt4MapRow, box_rows};
      make_map_nd(m, base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, dims, strides, box, false, what);
    };
    const uint64_t b1 = experts_here * uint64_t(I) * H, b2 = experts_here * uint64_t(H) * I / 2;
    XSTAGE_REQUIRE(b1 / kInt4MapRow < (uint64_t(1) << 31), "moe layer: W4A8 weights of ", b1,
                   " bytes per launch exceed the 2^31 rows of 256 bytes a tensor map addresses");
    frag_map(&maps[2], w1, b1, 2 * kInt4BlockRows, "w1 (int4 fragments, 8 KB boxes)");
    frag_map(&maps[5], w2, b2, 2 * kInt4BlockRows, "w2 (int4 fragments, 8 KB boxes)");
    frag_map(&maps[15], w2, b2, 4 * kInt4BlockRows, "w2 (int4 fragments, 16 KB boxes)");
    frag_map(&maps[10], w2, b2, kInt4BlockRows, "w2 (int4 fragments, 4 KB boxes)");
  }

  // ---- per-call state: row readiness from zero; epochs of the two signal slots
  uint32_t* epochs = plan_epochs(ws.plan_state_, ranks);
  PaddingZero pz;  // MoeLayerParams::zero_padding: the padding rows this launch's tiles load, zeroed first
  if (prm.zero_padding == 1) {
    pz.ranks = ranks;
    pz.experts = El;
    pz.rows_cap = int(R);
    pz.row_bytes = H * (bf16 ? 2 : 1);
    pz.kblocks = bf16 ? 0 : H / kBlockK;
    pz.b_m = kBlockM;
    pz.whole = bf16;
    pz.x = static_cast<uint8_t*>(ws.recv_x_->local(first));
    pz.sa = bf16 ? nullptr : static_cast<float*>(ws.recv_sa_->local(first));
    pz.row_offset = dt + o_off + size_t(first) * (El + 1);
    pz.tokens = dt + o_tok;
  }
  ok(launch_call_prologue(static_cast<uint32_t*>(ws.row_ready_->local(first)),
                          ws.row_ready_->bytes() * ranks / sizeof(uint32_t), epochs, uint32_t(ctas), pz, stream),
     "call prologue launch");

  auto fill = [&](auto& kp) {
    using Sched = typename std::remove_reference_t<decltype(kp)>::Sched;
    fill_common(kp, team, prm, ctas, maps, ls.cluster, ls.share);
    kp.rows_cap = int(R);
    moe::DispatchLayout dl;  // the scalars of either plan's view; the tables in device memory
    dl.place = moe::make_placement(s.experts, P);
    dl.tokens_per_rank = s.tokens_per_rank;  // (a host-side stride; the kernel reads the tables)
    dl.topk = K;
    dl.b_m = kBlockM;
    kp.dl = dl.rebased(dt + o_counts, dt + o_base, dt + o_off);
    for (int g = 0; g < ranks; ++g) {
      const int r = first + g;
      sched::MoeLayout l;
      l.num_experts = El;
      l.row_offset = dt + o_off + size_t(r) * (El + 1);
      l.tokens = dt + o_tok + size_t(g) * El;
      // (W8A8 and a host plan only: MoeLayerParams::row_order)
      l.row_order = prm.row_order == 1 && prm.weights == MoeWeightFormat::kFp8 && !device_plan ? dt + pr.o_order[g] : nullptr;
      l.l1_ntiles = I / kBlockN;  // one L1 tile = 128 gate + 128 up columns -> 128 h columns
      l.l2_ntiles = n2;
      l.b_m = kBlockM;
      typename Sched::Params sp;
      if constexpr (std::is_same_v<Sched, sched::MoeInterleavedScheduler>) {
        // Weight-sharing pairs: an L2 tile may compute the next row's tile at its position (moe_kernel.cuh, OwnRow),
        // so L1 must lead by 2 rows for the waits to stay on earlier positions (docs/SCHEDULERS.md).
        sp.lead = prm.lead > 0 ? prm.lead : std::max(moe_lead_knee(ctas, I), share_weights ? 2 : 1);
      } else {
        // 0: waves sized to fill the CTAs (enough experts that a wave's Linear-1 tiles cover every CTA), from the
        // rows of the layout in device memory (sched::auto_experts_per_wave; the same value for either plan).
        sp.experts_per_wave = prm.experts_per_wave;  // check_params: >= 0
        sp.wave_lag = prm.wave_lag;
        sp.wave_ctas = ctas;
      }
      sp.instances = ctas / ls.cluster;  // a pair is one scheduler instance with two roles
      sp.roles = ls.cluster;
      sp.layout = l;          // device arrays (validate reads none of them)
      Sched::validate(sp);
      XSTAGE_CHECK(Sched::grid_size(sp) == ctas, "moe layer: scheduler grid differs from the CTAs per rank");
      kp.sched[g] = sp;
      kp.topk_index[g] = dt + o_idx + g * pr.tk;
      kp.topk_pos[g] = dt + o_pos + g * pr.tk;
      kp.tokens[g] = tokens[g];
      kp.x[g] = static_cast<const uint8_t*>(prm.rank[g].x);
      kp.x_scale[g] = prm.rank[g].x_scale;
    }
    kp.recv_x = ws.recv_x_->peers();
    kp.recv_sa = ws.recv_sa_ ? ws.recv_sa_->peers() : runtime::PeerTable{};  // bf16: no scale buffers
    kp.recv_meta = ws.recv_meta_->peers();
    kp.combine = ws.combine_->peers();
    kp.signal = ws.signals_->table();
    kp.h = static_cast<uint8_t*>(ws.h_->local(first));
    kp.h_scale = ws.h_scale_ ? static_cast<float*>(ws.h_scale_->local(first)) : nullptr;
    kp.row_ready = static_cast<uint32_t*>(ws.row_ready_->local(first));
    kp.dispatch_epoch = epochs + kSlotDispatch;
    kp.err = ws.err_;
    kp.trace = nullptr;
    kp.trace_cap = 0;
    if (prm.trace) {
      // Capacity: an instance walks at most ceil(T1 / S) + ceil(T2 / S) tiles (T_i: tiles of stream i).
      int cap = 1;
      for (int g = 0; g < ranks; ++g) {
        // (a device plan's rows are known on the device only: the workspace's worst case)
        const long long rows = device_plan ? ws.rows_capacity() / kBlockM : pr.rows[g];
        cap = std::max<long long>(cap, (rows * (I / kBlockN) + ctas - 1) / ctas + (rows * n2 + ctas - 1) / ctas + 1);
      }
      const size_t bytes = size_t(ranks) * ctas * cap * kTraceWords * sizeof(uint64_t);
      ok(cudaMemsetAsync(grow(ws.trace_, ws.trace_bytes_, bytes, "trace"), 0, bytes, stream), "cudaMemsetAsync (trace)");
      ws.trace_cap_ = cap;
      ws.trace_ctas_ = ranks * ctas;
      ws.trace_ctas_per_rank_ = ctas;
      kp.trace = ws.trace_;
      kp.trace_cap = cap;
    }
    ok(launch_fused(kp, prm.weights, prm.trace, ranks * ctas, stream), "fused MoE kernel launch");
  };
  if (prm.order == MoeOrder::kExpertWave) {
    KernelParams<sched::MoeExpertWaveScheduler> kp{};
    fill(kp);
  } else {
    KernelParams<sched::MoeInterleavedScheduler> kp{};
    fill(kp);
  }

  // ---- every rank's combine stores into this rank's buffer, then the weighted sum
  ws.signals_->wait_device(kSlotCombine, epochs + kSlotCombine, stream);
  CombineParams cp{};
  cp.view = team.view();
  cp.topk = K;
  cp.hidden = H;
  cp.combine = ws.combine_->peers();
  for (int g = 0; g < ranks; ++g) {
    cp.weight[g] = prm.rank[g].topk_weight;
    cp.out[g] = prm.rank[g].out;
    cp.tokens[g] = tokens[g];
  }
  cp.plan_rec = device_plan ? plan_records(ws.plan_state_) : nullptr;
  const int most = *std::max_element(tokens.begin(), tokens.end());
  const int blocks = std::max(1, std::min(most, 4096));  // CTAs walk tokens (combine_kernel)
  ok(launch_combine(cp, blocks, ranks, stream), "combine kernel launch");
}

void run_moe_layer(runtime::Team& team, MoeWorkspace& ws, const MoeLayerParams& params, cudaStream_t stream) {
  prepare_moe_layer(team, ws, params, stream);
  launch_moe_layer(team, ws, params, stream);
}

}  // namespace xstage::moe_kernel
