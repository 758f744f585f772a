// GPU tests of the fused MoE layer kernel (W8A8, W4A8 and bf16; src/kernels/moe, docs/MOE.md "Fused kernel").
// They skip cleanly without an sm_90 device; results/moe/correctness holds what they printed on an H200.
//
// Each case: random weights and activations (xstage::moe generators), quantized exactly as the kernel
// expects (quantize_weight_128x128, quantize_act_1x128; bf16: rounded to bf16), a routing (balanced, skewed,
// or hand-made with empty experts and ranks receiving nothing), ranks emulated on one GPU (P = 1, 2, 4, 8),
// every workspace buffer and every output poisoned with NaN before the call. The kernel's output is compared
// with the reference of its own precision, MoeReference(W8A8 / W4A8 / Bf16) -- the same quantization or
// rounding -- with tolerances tied to that reference's own error against MoeReference(Fp32) (docs/MOE.md:
// FA3 style):
//   rms(out - ref_p) <= 0.25 * rms(ref_p - ref_fp32)
//   max|out - ref_p| <= 2 * max|ref_p - ref_fp32| + 1e-3 * max|ref_fp32|
// and no NaN anywhere (a NaN means an untouched combine entry, a padding row leaking, or a bad scale).
// The bf16 tests (Bf16*) also check that emulated P = 2, 4, 8 and both tile orders give the P = 1 output bit for bit.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../common/gpu_test.hpp"
#include "../common/usage_error.hpp"
#include "moe_layer.hpp"
#include "moe_params.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/moe/reference.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/runtime/team.hpp"

using namespace xstage;
using namespace xstage::testing_gpu;
using moe_kernel::MoeOrder;
using moe_kernel::MoeWeightFormat;

namespace {

// memcmp of n bytes that is defined for n = 0 too (memcmp's pointers must not be null even then, and an empty
// vector's data() may be: UBSan flagged a full rank's empty poison tail, s66).
bool same_bytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

enum class Route { kBalanced, kSkewed, kFirstRankOnly, kTileEdges };

struct Case {
  int world, tokens, hidden, inter, experts, topk;
  Route route = Route::kBalanced;
  MoeOrder order = MoeOrder::kExpertWave;
  int calls = 1;  // > 1: several calls on one workspace (epochs; a new routing each call)
  bool int4 = false;  // W4A8 weights (int4, per-(row, 128-group) scales) instead of W8A8
  bool bf16 = false;  // bf16 activations and weights, no scales (MoeWeightFormat::kBf16)
  int cluster = 0;    // MoeLayerParams::cluster (0: auto = CTA pairs where the N-tile counts are even)
  int l2_cols = 0;    // MoeLayerParams::l2_cols (0: auto)
  // Also run the same call on single CTAs (cluster 1) and require it bit-identical to the first run: a CTA pair
  // computes every tile with the same math, only the A operand arrives by multicast.
  bool check_single = false;
  // Also run it with the MMA warpgroups' batches alternating (MoeLayerParams::pingpong = 1), Expert-Wave with lagged
  // waves (wave_lag 1: only the order of tiles changes), with two Linear-2
  // scratch accumulators (l2_scratches = 2), with every L2 cache hint (l2_hints = kHintAll) and (W8A8, W4A8 with
  // hidden % 512 == 0) with 128- and with 256-column Linear-2 tiles (l2_cols; auto picks 256 there), each required
  // bit-identical: the first two only change when batches run, the hints only where lines stay in L2, the widths
  // which CTA computes a block.
  bool check_batch_timing = false;
  // Also run it with CTA pairs that share the weights (cluster 2, pair_share 2: an expert's row tiles b, b + 1 at one
  // N tile where both are full tiles; 3: any two; other rows as A-sharing pairs) and require it bit-identical to the
  // first run (and, W8A8, with the per-tile trace and pingpong).
  bool check_pair_share = false;
  bool pair_share_pingpong = false;  // the W8A8 weight-sharing variant also with pingpong 1 (not under racecheck)
  // Also run it with the A operand of an expert's last row tile loaded only up to its valid rows rounded up to 16
  // (a_trim 1; the rows not loaded only feed padding outputs) and with a TMA load per box (merge_loads 0; the first
  // run merges adjacent boxes) and with a 256-column Linear-2 tile's second block staged through the slot instead of
  // its last pipeline stage (l2_borrow 0) and with a stage released as soon as it is read where the next one is late
  // (early_release 1), each required bit-identical. With check_pair_share, the weight-sharing
  // pairs too.
  bool check_loads = false;
  // Run on a stream of the test's own (non-blocking), not the team's, and check on it (MoeWorkspace::check's stream).
  bool own_stream = false;
  // Also run every call with the routing in device memory (MoeRankInputs::topk_index: the plan made on the device,
  // the counts exchanged by peer stores) and require its tables equal to the host plan's and its output bit-identical.
  bool check_device_plan = true;
  // Also run every call on receive rows that hold an earlier call's values (MoeWorkspace::fill_receive kStale), with
  // zero_padding 0 and 1, each with the host plan and the device plan, and require the output bit-identical to the
  // first run; read the receive rows back and
  // require that the launch wrote no row but its dispatched ones and, with zero_padding, zeros into exactly the
  // padding rows (and row scales) its tiles load (moe::loaded_padding_rows).
  bool check_padding = false;
};

std::string name(const Case& c) {
  char b[200];
  std::snprintf(b, sizeof b, "P=%d T=%d H=%d I=%d E=%d k=%d route=%d order=%d %s cluster=%d", c.world, c.tokens,
                c.hidden, c.inter, c.experts, c.topk, int(c.route), int(c.order),
                c.bf16 ? "bf16" : c.int4 ? "w4a8" : "w8a8", c.cluster);
  return b;
}

// The receive rows after a launch (`after`) against before it: on each of the P local ranks (E/P = El experts, R rows),
// no row but the call's dispatched ones written, except, with `zeroed`, the padding rows its tiles load
// (moe::loaded_padding_rows of the tables `tab`), which must then hold zero codes and zero row scales. Returns the
// padding rows checked for zeros.
long long check_receive_rows(const moe_kernel::MoeWorkspace::PlanTables& tab,
                             const moe_kernel::MoeWorkspace::ReceiveRows& before,
                             const moe_kernel::MoeWorkspace::ReceiveRows& after, int P, int El, int R, int H, bool bf16,
                             bool zeroed) {
  const size_t row_bytes = size_t(H) * (bf16 ? 2 : 1), KB = bf16 ? 0 : size_t(H / 128);
  long long padding_rows = 0;
  EXPECT_EQ(after.codes.size(), size_t(P) * R * row_bytes);
  EXPECT_EQ(after.scales.size(), size_t(P) * R * KB);
  if (after.codes.size() != before.codes.size() || after.codes.size() != size_t(P) * R * row_bytes ||
      after.scales.size() != before.scales.size() || after.scales.size() != size_t(P) * R * KB)
    return 0;
  const std::vector<uint8_t> zeros(row_bytes, 0);
  for (int g = 0; g < P; ++g) {
    // each row of rank g: 0 = nothing of this call, 1 = dispatched, 2 = loaded padding; scales: 2 up to scale_end
    std::vector<int> code_kind(size_t(R), 0), scale_kind(size_t(R), 0);
    for (int le = 0; le < El; ++le) {
      const int n = tab.tokens[size_t(g) * El + le], row0 = tab.row_offset[size_t(g) * (El + 1) + le] * 128;
      const moe::PaddingRows pad = moe::loaded_padding_rows(n, 128, bf16);
      if (row0 + pad.scale_end > R) {
        ADD_FAILURE() << "rank " << g << " expert " << le << ": padding rows past the receive buffer";
        return padding_rows;
      }
      for (int i = 0; i < n; ++i) code_kind[size_t(row0 + i)] = scale_kind[size_t(row0 + i)] = 1;
      for (int i = pad.begin; i < pad.end; ++i) code_kind[size_t(row0 + i)] = 2;
      for (int i = pad.begin; i < pad.scale_end; ++i) scale_kind[size_t(row0 + i)] = 2;
      if (zeroed) padding_rows += pad.end - pad.begin;
    }
    for (int row = 0; row < R; ++row) {
      const size_t at = (size_t(g) * R + row) * row_bytes;
      const uint8_t* got = after.codes.data() + at;
      if (code_kind[size_t(row)] == 2 && zeroed) {
        if (std::memcmp(got, zeros.data(), row_bytes) != 0) {
          ADD_FAILURE() << "rank " << g << " row " << row << ": a loaded padding row not zeroed";
          return padding_rows;
        }
      } else if (code_kind[size_t(row)] != 1 && std::memcmp(got, before.codes.data() + at, row_bytes) != 0) {
        ADD_FAILURE() << "rank " << g << " row " << row << " (" << (code_kind[size_t(row)] == 2 ? "padding" : "unused")
                      << "): written by the launch";
        return padding_rows;
      }
      for (size_t kb = 0; kb < KB; ++kb) {
        const size_t si = (size_t(g) * KB + kb) * R + row;
        if (scale_kind[size_t(row)] == 2 && zeroed) {
          if (after.scales[si] != 0.0f) {
            ADD_FAILURE() << "rank " << g << " row " << row << " K block " << kb << ": a padding row's scale not zeroed";
            return padding_rows;
          }
        } else if (scale_kind[size_t(row)] != 1 && std::memcmp(&after.scales[si], &before.scales[si], 4) != 0) {
          ADD_FAILURE() << "rank " << g << " row " << row << " K block " << kb << ": scale written by the launch";
          return padding_rows;
        }
      }
    }
  }
  return padding_rows;
}

// Case::check_padding for one call: prm on stale receive rows, with zero_padding 0 and 1, with the host plan and with
// the plan made on the device (run_case's prose).
void check_padding_rows(runtime::Team& team, moe_kernel::MoeWorkspace& ws, const moe_kernel::MoeLayerParams& prm,
                        const moe::Routing& routing, cudaStream_t st, int T, int H,
                        const std::vector<std::vector<float>>& outs, const std::vector<std::unique_ptr<DevBuf>>& d_out,
                        uint32_t seed) {
  const int P = team.world(), El = prm.shape.experts / P, R = ws.rows_capacity(), K = prm.shape.topk;
  const bool bf16 = ws.bf16_rows();
  const moe_kernel::MoeWorkspace::PlanTables tab = ws.read_plan_tables(st);
  std::vector<std::unique_ptr<DevBuf>> d_idx;  // the device plan's inputs: each rank's routing in device memory
  moe_kernel::MoeLayerParams pd = prm;
  pd.topk_index_all = nullptr;
  for (int r = 0; r < P; ++r) {
    d_idx.push_back(std::make_unique<DevBuf>(size_t(T) * K * 4));
    CUDA_CHECK(cudaMemcpy(d_idx[size_t(r)]->p, routing.rank_index(r), size_t(T) * K * 4, cudaMemcpyHostToDevice));
    pd.rank[r].topk_index = static_cast<const int32_t*>(d_idx[size_t(r)]->p);
  }
  long long padding_rows = 0;
  for (int run = 0; run < 4; ++run) {
    const int zero = run % 2, device_plan = run / 2;
    const std::string what = std::string("stale receive rows, ") + (device_plan ? "device" : "host") +
                             " plan, zero_padding " + std::to_string(zero);
    SCOPED_TRACE(what);
    moe_kernel::MoeLayerParams pv = device_plan ? pd : prm;
    pv.zero_padding = zero;
    for (int r = 0; r < P; ++r) fill_now(d_out[size_t(r)]->p, 0xFF, size_t(T) * H * 4);
    ws.poison(st);
    ws.fill_receive(moe_kernel::MoeReceiveFill::kStale, st, seed + 5u + uint32_t(run));
    const moe_kernel::MoeWorkspace::ReceiveRows before = ws.read_receive(st);
    moe_kernel::run_moe_layer(team, ws, pv, st);
    ws.check(team, "moe layer test, " + what, st);
    for (int r = 0; r < P; ++r) {
      std::vector<float> out(size_t(T) * H);
      CUDA_CHECK(cudaMemcpy(out.data(), d_out[size_t(r)]->p, out.size() * 4, cudaMemcpyDeviceToHost));
      ASSERT_EQ(std::memcmp(out.data(), outs[size_t(r)].data(), out.size() * 4), 0)
          << "rank " << r << ": " << what << " differs from the first run";
    }
    const moe_kernel::MoeWorkspace::ReceiveRows after = ws.read_receive(st);
    padding_rows += check_receive_rows(tab, before, after, P, El, R, H, bf16, zero != 0);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(padding_rows, 0) << "the case has no padding rows to zero";
  std::printf("    padding rows zeroed: %lld\n", padding_rows);
}

// bf16 bit patterns of n floats (round to nearest even: moe::bf16_round, = __float2bfloat16_rn).
std::vector<uint16_t> to_bf16(const float* v, size_t n) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const float r = moe::bf16_round(v[i]);
    uint32_t b;
    std::memcpy(&b, &r, 4);
    out[i] = uint16_t(b >> 16);
  }
  return out;
}

// Every token of every rank goes to experts of rank 0 only (the first k of E/P local experts, rotated):
// rank 0's other experts and every expert of the other ranks get zero tokens, the other ranks receive
// nothing, and their tokens are routed to no local expert.
moe::Routing first_rank_only(int P, int T, int E, int k, uint32_t seed) {
  moe::Routing r;
  r.world = P;
  r.tokens_per_rank = T;
  r.experts = E;
  r.topk = k;
  const int el = E / P;
  const int used = std::max(k, el / 2);  // some of rank 0's experts stay empty when el > 2k
  r.index.resize(size_t(P) * T * k);
  r.weight.resize(r.index.size());
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        r.index[r.at(s, t, j)] = (t + j + int(seed % 7)) % used;
        r.weight[r.at(s, t, j)] = (j == 0 ? 0.5f : 0.5f / float(k - 1 > 0 ? k - 1 : 1));
      }
  return r;
}

// Top-1 routing whose per-expert row counts sit on the tile edges: the global batch (rank-major) fills experts
// 0, 1, ... in turn with 64, 65, 1, 129, 0, 192, 63, 128, ... rows (the list repeats; the last expert takes what
// is left). A block of at most 64 rows is a half tile (64, 1, 63, the tails of 129 and 192), the others full.
moe::Routing tile_edges(int P, int T, int E) {
  // rows per expert in turn: half / full tile edges first (the first 8 sum to 642), then W4A8's quarter and eighth tile
  // edges, alone and as a second row tile's tail (128 + 16, 128 + 33)
  static const int kCounts[] = {64, 65, 1, 129, 0, 192, 63, 128, 16, 17, 32, 33, 144, 161};
  constexpr int kN = int(sizeof(kCounts) / sizeof(kCounts[0]));
  moe::Routing r;
  r.world = P;
  r.tokens_per_rank = T;
  r.experts = E;
  r.topk = 1;
  r.index.resize(size_t(P) * T);
  r.weight.assign(r.index.size(), 1.0f);
  int e = 0, left = kCounts[0];
  for (size_t g = 0; g < r.index.size(); ++g) {
    while (left == 0 && e + 1 < E) left = kCounts[(++e) % kN];
    r.index[g] = e;  // rank-major: global token g is token g % T of rank g / T
    --left;
  }
  return r;
}

struct Error {
  double rms_kernel = 0, rms_ref = 0, max_kernel = 0, max_ref = 0, max_fp32 = 0;
  long long nan = 0;
};

// The kernel's output against the reference of its precision (ref_p) and the fp32 one, over several ranks'
// slices; finish() checks the bounds of the file header. A non-finite output fails (first 5 named).
struct ErrorCheck {
  Error err;
  double se_k = 0, se_r = 0;
  size_t n = 0;
  void add(int rank, const std::vector<float>& out, const std::vector<float>& ref_p, const std::vector<float>& ref32,
           int H) {
    for (size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(out[i])) {
        if (err.nan++ < 5) ADD_FAILURE() << "rank " << rank << " token " << i / H << " channel " << i % H << ": " << out[i];
        continue;
      }
      const double dk = double(out[i]) - ref_p[i], dr = double(ref_p[i]) - ref32[i];
      se_k += dk * dk;
      se_r += dr * dr;
      err.max_kernel = std::max(err.max_kernel, std::fabs(dk));
      err.max_ref = std::max(err.max_ref, std::fabs(dr));
      err.max_fp32 = std::max(err.max_fp32, std::fabs(double(ref32[i])));
      ++n;
    }
  }
  void finish(const std::string& what) {
    err.rms_kernel = n ? std::sqrt(se_k / n) : 0;
    err.rms_ref = n ? std::sqrt(se_r / n) : 0;
    std::printf("%s: rms(kernel - ref) %.3e, rms(ref - fp32) %.3e (ratio %.3f), max %.3e / %.3e, NaN %lld\n",
                what.c_str(), err.rms_kernel, err.rms_ref, err.rms_ref > 0 ? err.rms_kernel / err.rms_ref : 0.0,
                err.max_kernel, err.max_ref, err.nan);
    EXPECT_GT(n, 0u);
    EXPECT_EQ(err.nan, 0);
    EXPECT_LE(err.rms_kernel, 0.25 * err.rms_ref);  // W8A8 / W4A8 measured 0.04-0.09 (results/moe/correctness)
    EXPECT_LE(err.max_kernel, 2 * err.max_ref + 1e-3 * err.max_fp32);
  }
};

// Every expert's weights quantized as the kernel reads them: W8A8 codes with 128x128 block scales, or W4A8 int4 (two's
// complement pairs, packed on the device by pack_int4_weights) with per-(row, 128-group) scales K-block-major
// ([K/128][rows] per expert; quantize_int4 gives [rows][K/128]).
struct QuantWeights {
  MoeWeightFormat format;
  std::vector<uint8_t> w1, w2;
  std::vector<float> s1, s2;
};

QuantWeights quantize_experts(const moe::MoeWeights& w, int H, int I, int E, bool int4) {
  QuantWeights q;
  q.format = int4 ? MoeWeightFormat::kInt4 : MoeWeightFormat::kFp8;
  for (int e = 0; e < E; ++e) {
    if (int4) {
      const moe::Int4Tensor q1 = moe::quantize_int4(w.w1_of(e), 2 * I, H), q2 = moe::quantize_int4(w.w2_of(e), H, I);
      q.w1.insert(q.w1.end(), q1.packed.begin(), q1.packed.end());
      q.w2.insert(q.w2.end(), q2.packed.begin(), q2.packed.end());
      for (const auto* t : {&q1, &q2}) {  // scales K-block-major
        std::vector<float>& dst = t == &q1 ? q.s1 : q.s2;
        const int kb = t->cols / t->group;
        for (int b = 0; b < kb; ++b)
          for (int r = 0; r < t->rows; ++r) dst.push_back(t->scale[size_t(r) * kb + b]);
      }
    } else {
      const moe::Fp8Tensor q1 = moe::quantize_weight_128x128(w.w1_of(e), 2 * I, H);
      const moe::Fp8Tensor q2 = moe::quantize_weight_128x128(w.w2_of(e), H, I);
      q.w1.insert(q.w1.end(), q1.code.begin(), q1.code.end());
      q.s1.insert(q.s1.end(), q1.scale.begin(), q1.scale.end());
      q.w2.insert(q.w2.end(), q2.code.begin(), q2.code.end());
      q.s2.insert(q.s2.end(), q2.scale.begin(), q2.scale.end());
    }
  }
  return q;
}

// A W8A8 layer's inputs on the device, P ranks of T tokens: the experts quantized as the kernel reads them, each rank's
// x quantized 1x128, its top-k weights and indices, `out_sets` output buffers per rank; `prm` points at them (out: the
// first set) with the routing on the host (topk_index_all; use_device_routing() switches to the device indices).
struct W8A8Layer {
  std::vector<int32_t> index;  // the host routing prm.topk_index_all points at
  std::unique_ptr<DevBuf> w1, w2, s1, s2;
  std::vector<std::unique_ptr<DevBuf>> x, xs, wt, idx;
  std::vector<std::vector<std::unique_ptr<DevBuf>>> out;  // [set][rank]
  moe_kernel::MoeLayerParams prm;

  W8A8Layer(const moe::MoeWeights& w, const moe_kernel::MoeShape& shape, int P, const std::vector<float>& x_all,
            const moe::Routing& r, int out_sets = 1)
      : index(r.index), out(size_t(out_sets)) {
    const int T = shape.tokens_per_rank, H = shape.hidden, K = shape.topk;
    const QuantWeights q = quantize_experts(w, H, shape.inter, shape.experts, false);
    auto upload = [](const void* src, size_t bytes) {  // (the weights)
      auto d = std::make_unique<DevBuf>(std::max<size_t>(bytes, 1));
      CUDA_CHECK(cudaMemcpy(d->p, src, bytes, cudaMemcpyHostToDevice));
      return d;
    };
    w1 = upload(q.w1.data(), q.w1.size());
    w2 = upload(q.w2.data(), q.w2.size());
    s1 = upload(q.s1.data(), q.s1.size() * 4);
    s2 = upload(q.s2.data(), q.s2.size() * 4);
    prm.shape = shape;
    prm.topk_index_all = index.data();
    prm.w1 = w1->p;
    prm.w2 = w2->p;
    prm.w1_scale = static_cast<const float*>(s1->p);
    prm.w2_scale = static_cast<const float*>(s2->p);
    for (int rk = 0; rk < P; ++rk) {
      x.push_back(std::make_unique<DevBuf>(size_t(T) * H));
      xs.push_back(std::make_unique<DevBuf>(size_t(T) * (H / 128) * 4));
      wt.push_back(std::make_unique<DevBuf>(size_t(T) * K * 4));
      idx.push_back(std::make_unique<DevBuf>(size_t(T) * K * 4));
      for (auto& set : out) set.push_back(std::make_unique<DevBuf>(size_t(T) * H * 4));
      prm.rank[rk] = {x[rk]->p, static_cast<const float*>(xs[rk]->p), static_cast<const float*>(wt[rk]->p),
                      static_cast<float*>(out[0][rk]->p)};
    }
    set_inputs(x_all, r);
  }
  // New activations and routing into the same device buffers (and the host routing prm points at), synchronously.
  void set_inputs(const std::vector<float>& x_all, const moe::Routing& r) {
    const int T = prm.shape.tokens_per_rank, H = prm.shape.hidden, K = prm.shape.topk;
    index = r.index;
    if (prm.topk_index_all != nullptr) prm.topk_index_all = index.data();
    for (size_t rk = 0; rk < x.size(); ++rk) {
      const moe::Fp8Tensor qx = moe::quantize_act_1x128(x_all.data() + rk * T * H, T, H);
      CUDA_CHECK(cudaMemcpy(x[rk]->p, qx.code.data(), qx.code.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(xs[rk]->p, qx.scale.data(), qx.scale.size() * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(wt[rk]->p, r.rank_weight(int(rk)), size_t(T) * K * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(idx[rk]->p, r.rank_index(int(rk)), size_t(T) * K * 4, cudaMemcpyHostToDevice));
    }
  }
  void use_device_routing() {
    prm.topk_index_all = nullptr;
    for (size_t rk = 0; rk < idx.size(); ++rk) prm.rank[rk].topk_index = static_cast<const int32_t*>(idx[rk]->p);
  }
};

void run_case(const Case& c) {
  const int P = c.world, T = c.tokens, H = c.hidden, I = c.inter, E = c.experts, K = c.topk;
  SCOPED_TRACE(name(c));
  const uint32_t seed = test_seed() + 977u * P + 31u * T + E + K;
  auto team = runtime::Team::emulated(P);
  ASSERT_EQ(team->local_ranks(), P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  const MoeWeightFormat format = c.bf16 ? MoeWeightFormat::kBf16 : c.int4 ? MoeWeightFormat::kInt4 : MoeWeightFormat::kFp8;
  moe_kernel::MoeWorkspace ws(*team, shape, format);
  cudaStream_t st = team->stream();
  struct OwnStream {
    cudaStream_t s = nullptr;
    ~OwnStream() { if (s) cudaStreamDestroy(s); }
  } own;
  if (c.own_stream) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&own.s, cudaStreamNonBlocking));
    st = own.s;
  }

  // Weights (all experts: the emulated launch serves every rank), quantized as the kernel reads them
  // (bf16: the bit patterns of the rounded weights, no scales).
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  std::vector<uint8_t> w1c, w2c;
  std::vector<float> w1s, w2s;
  if (c.bf16) {
    const std::vector<uint16_t> b1 = to_bf16(w.w1.data(), w.w1.size()), b2 = to_bf16(w.w2.data(), w.w2.size());
    w1c.resize(b1.size() * 2);
    w2c.resize(b2.size() * 2);
    std::memcpy(w1c.data(), b1.data(), w1c.size());
    std::memcpy(w2c.data(), b2.data(), w2c.size());
  } else {
    QuantWeights q = quantize_experts(w, H, I, E, c.int4);
    w1c = std::move(q.w1);
    w2c = std::move(q.w2);
    w1s = std::move(q.s1);
    w2s = std::move(q.s2);
  }
  DevBuf d_w1(w1c.size()), d_w2(w2c.size()), d_w1s(std::max<size_t>(w1s.size(), 1) * 4),
      d_w2s(std::max<size_t>(w2s.size(), 1) * 4);
  CUDA_CHECK(cudaMemcpy(d_w1.p, w1c.data(), w1c.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2.p, w2c.data(), w2c.size(), cudaMemcpyHostToDevice));
  if (c.int4) {  // the kernel's fragment layout, in place, as a user converts quantize_int4's bytes once
    moe_kernel::pack_int4_weights(d_w1.p, d_w1.p, E, 2 * I, H);
    moe_kernel::pack_int4_weights(d_w2.p, d_w2.p, E, H, I);
  }
  CUDA_CHECK(cudaMemcpy(d_w1s.p, w1s.data(), w1s.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2s.p, w2s.data(), w2s.size() * 4, cudaMemcpyHostToDevice));
  const moe::MoeReference ref8(w, c.bf16 ? moe::Precision::Bf16 : c.int4 ? moe::Precision::W4A8 : moe::Precision::W8A8),
      ref32(w, moe::Precision::Fp32);

  // Per-rank device tensors.
  std::vector<std::unique_ptr<DevBuf>> d_x, d_xs, d_wt, d_out;
  for (int r = 0; r < P; ++r) {
    d_x.push_back(std::make_unique<DevBuf>(size_t(T) * H * (c.bf16 ? 2 : 1)));
    d_xs.push_back(std::make_unique<DevBuf>(size_t(T) * (H / 128) * 4));
    d_wt.push_back(std::make_unique<DevBuf>(size_t(T) * K * 4));
    d_out.push_back(std::make_unique<DevBuf>(size_t(T) * H * 4));
  }

  for (int call = 0; call < c.calls; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    const uint32_t cs = seed + 7919u * call;
    const std::vector<float> x = moe::random_activations(size_t(P) * T * H, cs);
    moe::Routing routing;
    if (c.route == Route::kFirstRankOnly)
      routing = first_rank_only(P, T, E, K, cs);
    else if (c.route == Route::kTileEdges)
      routing = tile_edges(P, T, E);
    else
      routing = moe::generate_routing({P, T, E, K, c.route == Route::kSkewed ? moe::RoutingKind::Skewed
                                                                             : moe::RoutingKind::Balanced,
                                       1.0, cs});
    moe_kernel::MoeLayerParams prm;
    prm.shape = shape;
    prm.topk_index_all = routing.index.data();
    prm.weights = format;
    prm.w1 = static_cast<const uint8_t*>(d_w1.p);
    prm.w1_scale = c.bf16 ? nullptr : static_cast<const float*>(d_w1s.p);
    prm.w2 = static_cast<const uint8_t*>(d_w2.p);
    prm.w2_scale = c.bf16 ? nullptr : static_cast<const float*>(d_w2s.p);
    prm.order = c.order;
    prm.experts_per_wave = 2;
    prm.lead = 1;
    prm.cluster = c.cluster;
    prm.l2_cols = c.l2_cols;
    for (int r = 0; r < P; ++r) {
      if (c.bf16) {
        const std::vector<uint16_t> xb = to_bf16(x.data() + size_t(r) * T * H, size_t(T) * H);
        CUDA_CHECK(cudaMemcpy(d_x[r]->p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
      } else {
        const moe::Fp8Tensor q = moe::quantize_act_1x128(x.data() + size_t(r) * T * H, T, H);
        CUDA_CHECK(cudaMemcpy(d_x[r]->p, q.code.data(), q.code.size(), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_xs[r]->p, q.scale.data(), q.scale.size() * 4, cudaMemcpyHostToDevice));
      }
      CUDA_CHECK(cudaMemcpy(d_wt[r]->p, routing.rank_weight(r), size_t(T) * K * 4, cudaMemcpyHostToDevice));
      fill_now(d_out[r]->p, 0xFF, size_t(T) * H * 4);  // NaN
      prm.rank[r].x = d_x[r]->p;
      prm.rank[r].x_scale = c.bf16 ? nullptr : static_cast<const float*>(d_xs[r]->p);
      prm.rank[r].topk_weight = static_cast<const float*>(d_wt[r]->p);
      prm.rank[r].out = static_cast<float*>(d_out[r]->p);
    }
    ws.poison(st);
    moe_kernel::run_moe_layer(*team, ws, prm, st);
    ws.check(*team, "moe layer test", st);

    ErrorCheck check;
    std::vector<std::vector<float>> outs;
    for (int r = 0; r < P; ++r) {
      std::vector<float> out(size_t(T) * H);
      CUDA_CHECK(cudaMemcpy(out.data(), d_out[r]->p, out.size() * 4, cudaMemcpyDeviceToHost));
      const float* xr = x.data() + size_t(r) * T * H;
      const std::vector<float> o8 = ref8.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K);
      const std::vector<float> o32 = ref32.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K);
      check.add(r, out, o8, o32, H);
      outs.push_back(std::move(out));
    }
    check.finish(name(c) + " call " + std::to_string(call));
    if (c.check_device_plan) {
      const moe_kernel::MoeWorkspace::PlanTables host = ws.read_plan_tables(st);
      std::vector<std::unique_ptr<DevBuf>> d_idx;
      moe_kernel::MoeLayerParams pd = prm;
      pd.topk_index_all = nullptr;
      for (int r = 0; r < P; ++r) {
        d_idx.push_back(std::make_unique<DevBuf>(size_t(T) * K * 4));
        CUDA_CHECK(cudaMemcpy(d_idx[r]->p, routing.rank_index(r), size_t(T) * K * 4, cudaMemcpyHostToDevice));
        pd.rank[r].topk_index = static_cast<const int32_t*>(d_idx[r]->p);
        fill_now(d_out[r]->p, 0xFF, size_t(T) * H * 4);
      }
      ws.poison(st);
      moe_kernel::run_moe_layer(*team, ws, pd, st);
      ws.check(*team, "moe layer test, device plan", st);
      const moe_kernel::MoeWorkspace::PlanTables dev = ws.read_plan_tables(st);
      EXPECT_EQ(dev.counts, host.counts) << "device plan: counts";
      EXPECT_EQ(dev.src_base, host.src_base) << "device plan: src_base";
      EXPECT_EQ(dev.row_offset, host.row_offset) << "device plan: row_offset";
      EXPECT_EQ(dev.tokens, host.tokens) << "device plan: tokens per local expert";
      EXPECT_EQ(dev.index, host.index) << "device plan: index";
      EXPECT_EQ(dev.pos, host.pos) << "device plan: pos";
      for (int r = 0; r < P; ++r) {
        std::vector<float> out(size_t(T) * H);
        CUDA_CHECK(cudaMemcpy(out.data(), d_out[r]->p, out.size() * 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(std::memcmp(out.data(), outs[size_t(r)].data(), out.size() * 4), 0)
            << "rank " << r << ": the device plan's output differs from the host plan's";
      }
    }
    // The same call with other launch options: bit-identical to the first run.
    std::vector<std::pair<moe_kernel::MoeLayerParams, std::string>> variants;
    if (c.check_single) {
      variants.push_back({prm, "single CTAs (the first run: cluster " + std::to_string(c.cluster) + ")"});
      variants.back().first.cluster = 1;
    }
    if (c.check_batch_timing) {
      variants.push_back({prm, "alternating MMA warpgroups (pingpong 1)"});
      variants.back().first.pingpong = 1;
      variants.push_back({prm, "two Linear-2 scratch accumulators (l2_scratches 2)"});
      variants.back().first.l2_scratches = 2;
      variants.push_back({prm, "every L2 cache hint (l2_hints 7)"});
      variants.back().first.l2_hints = moe_kernel::kHintAll;
      if (prm.order == MoeOrder::kExpertWave) {  // each wave's Linear-2 tiles after the next wave's Linear-1 tiles
        variants.push_back({prm, "lagged waves (wave_lag 1)"});
        variants.back().first.wave_lag = 1;
      }
      // every Linear-1 tile first (the C ABI's XSTAGE_MOE_L1_FIRST; auto's choice where the lag pays)
      variants.push_back({prm, "every Linear-1 tile first (interleaved, lead kLeadAllRows)"});
      variants.back().first.order = MoeOrder::kInterleaved;
      variants.back().first.lead = moe_kernel::kLeadAllRows;
      // both Linear-2 widths where both run with the first run's cluster: an even count of 256-column tiles, or
      // hidden / 128 odd (the last 256-column tile ragged; no pairs with either width)
      if (!c.bf16 && (H % 512 == 0 || (H / 128) % 2 == 1)) {
        for (int cols : {128, 256}) {
          variants.push_back({prm, std::to_string(cols) + "-column Linear-2 tiles (l2_cols " + std::to_string(cols) +
                                       "; the first run: auto = " + std::to_string(moe_kernel::moe_l2_cols(prm)) + ")"});
          variants.back().first.l2_cols = cols;
        }
      }
    }
    if (c.check_pair_share) {
      for (int mode : {moe_kernel::kPairShareWeightsFull, moe_kernel::kPairShareWeights}) {
        variants.push_back({prm, "CTA pairs sharing the weights (cluster 2, pair_share " + std::to_string(mode) +
                                     "; the first run: cluster " + std::to_string(c.cluster) + ")"});
        variants.back().first.cluster = 2;
        variants.back().first.pair_share = mode;
        variants.back().first.lead = 2;  // the smallest lead weight sharing allows (the output does not depend on it)
      }
      if (!c.int4) {
        variants.push_back({variants.back().first, "pair_share 3 with the per-tile trace"});
        variants.back().first.trace = true;
        if (c.pair_share_pingpong) {
          variants.push_back({variants.back().first, "pair_share 3 with the per-tile trace and pingpong"});
          variants.back().first.pingpong = 1;
        }
      }
    }
    if (c.check_loads) {
      EXPECT_EQ(prm.a_trim, 0) << "the default loads whole A boxes";
      EXPECT_EQ(prm.merge_loads, 1) << "the default merges adjacent boxes";
      EXPECT_EQ(prm.l2_borrow, 1) << "the default stages a wide Linear-2 tile's second block in its last stage";
      EXPECT_EQ(prm.early_release, 0) << "the default releases a stage in the next block's shadow only";
      EXPECT_EQ(prm.row_order, 0) << "the default walks the rows in expert order";
      EXPECT_EQ(prm.half_together, 1) << "the default issues a half tile's gate and up batches together";
      EXPECT_EQ(prm.half_wide, 1) << "the default runs a half tile's own weights as m64n128 batches";
      EXPECT_EQ(prm.lean, 1) << "the default launches the lean W8A8 kernel where the options allow it";
      // Each option flipped from the default alone, on the first run and on every weight-sharing variant.
      struct Flip {
        const char* what;  // label up to its closing parenthesis
        int moe_kernel::MoeLayerParams::*field;
        int value;
        const char* first;  // the default, for the label
      };
      const Flip flips[] = {
          {"A rows up to the valid ones (a_trim 1", &moe_kernel::MoeLayerParams::a_trim, 1, "0"},
          {"a TMA load per box (merge_loads 0", &moe_kernel::MoeLayerParams::merge_loads, 0, "1"},
          {"the second Linear-2 block through the slot (l2_borrow 0", &moe_kernel::MoeLayerParams::l2_borrow, 0, "1"},
          {"a stage released early where the next one is late (early_release 1", &moe_kernel::MoeLayerParams::early_release,
           1, "0"},
          {"the rows walked in the spread order (row_order 1", &moe_kernel::MoeLayerParams::row_order, 1, "0"},
          {"a half tile's batches one at a time (half_together 0", &moe_kernel::MoeLayerParams::half_together, 0, "1"},
          {"a half tile's weights as loaded for a full tile (half_wide 0", &moe_kernel::MoeLayerParams::half_wide, 0, "1"},
          {"the kernel holding every option's code (lean 0", &moe_kernel::MoeLayerParams::lean, 0, "1"},
      };
      const size_t n = variants.size();
      for (const Flip& f : flips) {
        variants.push_back({prm, std::string(f.what) + "; the first run: " + f.first + ")"});
        variants.back().first.*f.field = f.value;
      }
      for (size_t i = 0; i < n; ++i)
        if (variants[i].first.pair_share > moe_kernel::kPairShareA && !variants[i].first.trace)
          for (const Flip& f : flips) {
            variants.push_back({variants[i].first, variants[i].second + ", " + f.what + ")"});
            variants.back().first.*f.field = f.value;
          }
    }
    for (const auto& [pv, what] : variants) {
      for (int r = 0; r < P; ++r) fill_now(d_out[r]->p, 0xFF, size_t(T) * H * 4);
      ws.poison(st);
      moe_kernel::run_moe_layer(*team, ws, pv, st);
      ws.check(*team, "moe layer test, " + what, st);
      for (int r = 0; r < P; ++r) {
        std::vector<float> out(size_t(T) * H);
        CUDA_CHECK(cudaMemcpy(out.data(), d_out[r]->p, out.size() * 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(std::memcmp(out.data(), outs[size_t(r)].data(), out.size() * 4), 0)
            << "rank " << r << ": " << what << " differs from the first run";
      }
    }
    if (c.check_padding) check_padding_rows(*team, ws, prm, routing, st, T, H, outs, d_out, cs);
  }
}

// ---- bf16: one global batch split over P emulated ranks (bit-identity across P and orders)
// A batch of `tokens` tokens routed as one rank: the routing's [1][tokens][k] arrays are also the [P][tokens/P][k]
// arrays of the same tokens split into P ranks of consecutive tokens, so every P sees the same rows.
struct Bf16Batch {
  int hidden = 0, inter = 0, experts = 0, topk = 0, tokens = 0;
  moe::MoeWeights w;
  std::vector<uint16_t> w1, w2;  // bf16 bits, all experts
  std::vector<float> x;          // [tokens][hidden] (the kernel gets its bf16 rounding)
  moe::Routing routing;          // world 1
};

Bf16Batch make_bf16_batch(int tokens, int hidden, int inter, int experts, int topk, Route route, uint32_t seed) {
  Bf16Batch b;
  b.hidden = hidden;
  b.inter = inter;
  b.experts = experts;
  b.topk = topk;
  b.tokens = tokens;
  b.w = moe::random_moe_weights(hidden, inter, experts, seed);
  b.w1 = to_bf16(b.w.w1.data(), b.w.w1.size());
  b.w2 = to_bf16(b.w.w2.data(), b.w.w2.size());
  b.x = moe::random_activations(size_t(tokens) * hidden, seed + 1);
  b.routing = moe::generate_routing({1, tokens, experts, topk, route == Route::kSkewed ? moe::RoutingKind::Skewed
                                                                                        : moe::RoutingKind::Balanced,
                                     1.0, seed + 2});
  return b;
}

// The bf16 layer over the batch on P emulated ranks of tokens / P tokens each (rank r: tokens [r T, (r+1) T)),
// workspace and outputs poisoned; returns out [tokens][hidden] in token order.
std::vector<float> run_bf16_split(const Bf16Batch& b, int P, MoeOrder order) {
  const int T = b.tokens / P, H = b.hidden, K = b.topk;
  EXPECT_EQ(T * P, b.tokens);
  auto team = runtime::Team::emulated(P);
  const moe_kernel::MoeShape shape{H, b.inter, b.experts, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape, MoeWeightFormat::kBf16);
  EXPECT_TRUE(ws.bf16_rows());
  cudaStream_t st = team->stream();
  DevBuf d_w1(b.w1.size() * 2), d_w2(b.w2.size() * 2), d_x(b.x.size() * 2), d_wt(b.routing.weight.size() * 4),
      d_out(b.x.size() * 4);
  const std::vector<uint16_t> xb = to_bf16(b.x.data(), b.x.size());
  CUDA_CHECK(cudaMemcpy(d_w1.p, b.w1.data(), b.w1.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2.p, b.w2.data(), b.w2.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_x.p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_wt.p, b.routing.weight.data(), b.routing.weight.size() * 4, cudaMemcpyHostToDevice));
  fill_now(d_out.p, 0xFF, b.x.size() * 4);  // NaN
  moe_kernel::MoeLayerParams prm;
  prm.shape = shape;
  prm.topk_index_all = b.routing.index.data();
  prm.weights = MoeWeightFormat::kBf16;
  prm.w1 = d_w1.p;
  prm.w2 = d_w2.p;
  prm.order = order;
  prm.experts_per_wave = 2;
  prm.lead = 1;
  for (int r = 0; r < P; ++r) {
    prm.rank[r].x = static_cast<const uint16_t*>(d_x.p) + size_t(r) * T * H;
    prm.rank[r].topk_weight = static_cast<const float*>(d_wt.p) + size_t(r) * T * K;
    prm.rank[r].out = static_cast<float*>(d_out.p) + size_t(r) * T * H;
  }
  ws.poison(st);
  moe_kernel::run_moe_layer(*team, ws, prm, st);
  ws.check(*team, "moe layer bf16 test");
  std::vector<float> out(b.x.size());
  CUDA_CHECK(cudaMemcpy(out.data(), d_out.p, out.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

// The batch's output against MoeReference(Bf16) with the bounds of the file header.
void check_bf16_batch(const Bf16Batch& b, const std::vector<float>& out, const std::string& what) {
  const moe::MoeReference ref16(b.w, moe::Precision::Bf16), ref32(b.w, moe::Precision::Fp32);
  const std::vector<float> o16 = ref16.forward(b.x.data(), b.tokens, b.routing.index.data(), b.routing.weight.data(), b.topk);
  const std::vector<float> o32 = ref32.forward(b.x.data(), b.tokens, b.routing.index.data(), b.routing.weight.data(), b.topk);
  ErrorCheck check;
  check.add(0, out, o16, o32, b.hidden);
  check.finish(what);
}

// First difference of two outputs, or "" when they are equal bit for bit.
std::string first_difference(const std::vector<float>& a, const std::vector<float>& b, int H) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  if (std::memcmp(a.data(), b.data(), a.size() * 4) == 0) return "";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return "token " + std::to_string(i / H) + " channel " + std::to_string(i % H) + ": " + std::to_string(a[i]) +
             " vs " + std::to_string(b[i]);
  return "";
}

}  // namespace

TEST(MoeLayerGpu, SingleRank) {
  NEED_SM90();
  run_case({1, 64, 256, 256, 8, 2});
}

TEST(MoeLayerGpu, SingleRankPartialTiles) {
  NEED_SM90();
  run_case({1, 100, 512, 256, 16, 4, Route::kSkewed});  // experts with partial last rows, some likely empty
}

// The layer on a caller's stream (non-blocking, not the team's), checked there; the variants (single CTAs, another
// Linear-2 width) on it too, bit-identical.
TEST(MoeLayerGpu, RunsOnTheCallersStream) {
  NEED_SM90();
  for (bool int4 : {false, true}) {
    Case c{2, 128, 512, 256, 16, 4, Route::kSkewed, MoeOrder::kInterleaved};
    c.int4 = int4;
    c.own_stream = true;
    c.check_single = true;
    c.calls = 2;
    run_case(c);
  }
}

TEST(MoeLayerGpu, EmulatedP2) {
  NEED_SM90();
  run_case({2, 128, 512, 256, 16, 4});
}

TEST(MoeLayerGpu, EmulatedP4Skewed) {
  NEED_SM90();
  run_case({4, 256, 256, 256, 8, 2, Route::kSkewed});
}

TEST(MoeLayerGpu, EmulatedP8) {
  NEED_SM90();
  run_case({8, 64, 256, 256, 16, 4});
}

TEST(MoeLayerGpu, EmulatedP8Large) {
  NEED_SM90();
  run_case({8, 512, 512, 256, 16, 2, Route::kSkewed});
}

// Rank 1 receives nothing, experts with zero tokens, tokens routed to no local expert.
TEST(MoeLayerGpu, EmptyExpertsAndIdleRanks) {
  NEED_SM90();
  run_case({2, 64, 256, 256, 8, 2, Route::kFirstRankOnly});
  run_case({4, 96, 256, 256, 16, 2, Route::kFirstRankOnly});
}

// Half tiles (at most 64 rows: the two consumer warpgroups split the N tile, m64n64; W4A8 runs tiles of at most 32 rows
// as quarter tiles, N = 32: tile_edges' 1-row tails) beside full ones in one
// layer, every format and both orders, P = 1 and emulated P = 2 (the same rows per expert: tile_edges' counts
// are over the global batch), with CTA pairs checked against single CTAs and the warpgroups' ping-pong against free-running ones.
// tile_edges' layer of 642 rows (64+65+1+129+0+192+63+128) with `hidden` in both orders: W8A8 at P = 1 and emulated
// P = 2, W4A8 at P = 2, then `more` (a last edit of the case) at P = 2; every run with its load, batch-timing and width
// variants (check_loads, check_batch_timing) and, with `single`, single CTAs beside the first run's launch.
template <class More>
void run_tile_edges(int hidden, int l2_cols, bool single, More more) {
  for (MoeOrder o : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    Case c{1, 642, hidden, 256, 8, 1, Route::kTileEdges, o};
    c.l2_cols = l2_cols;
    c.check_single = single;
    c.check_batch_timing = true;
    c.check_loads = true;
    run_case(c);
    c.world = 2;
    c.tokens = 321;
    run_case(c);
    c.int4 = true;
    run_case(c);
    c.int4 = false;
    if (more(c)) run_case(c);
  }
}

TEST(MoeLayerGpu, HalfAndFullTiles) {
  NEED_SM90();
  run_tile_edges(512, 0, true, [](Case& c) {
    c.bf16 = true;  // bf16 keeps full tiles: the same layer as a reference
    return true;
  });
}

// Ragged 256-column Linear-2 tiles (hidden / 128 odd, DiT-MoE-XL's case): the last tile's second block lies past the
// hidden size; it is computed on whatever the weight box holds (the next expert's rows, or the map's zero fill past
// the last expert) and never stored. Half and full tiles, W8A8 and W4A8, both orders, P = 1 and emulated P = 2, every
// load and staging variant, and 128-column tiles, all bit-identical and against the reference; then CTA pairs over
// an even count of wide tiles with a ragged one (hidden 1408: 6 tiles), sharing A or the weights.
TEST(MoeLayerGpu, RaggedLinear2Tiles) {
  NEED_SM90();
  // hidden 640, 5 blocks of 128: wide tiles 0, 1 and ragged 2 (auto: 128 columns; every variant ragged but the
  // 128-column one)
  run_tile_edges(640, 256, false, [](Case&) { return false; });
  for (bool int4 : {false, true}) {
    Case p{1, 160, 1408, 256, 8, 2, Route::kSkewed, MoeOrder::kExpertWave};  // 11 blocks: 6 wide tiles, pairs
    p.int4 = int4;
    p.l2_cols = 256;  // auto: 128 (11 tiles, no pairs)
    p.cluster = 2;
    p.check_single = true;
    p.check_pair_share = true;
    run_case(p);
  }
}

// What the receive rows hold where the tiles load padding rows reaches no result, and zero_padding zeroes exactly those
// rows (check_padding): tile_edges' tails of every size (half and full last tiles), W8A8, W4A8 and bf16, both orders,
// P = 1 (CTA pairs) and emulated P = 2 (single CTAs).
TEST(MoeLayerGpu, PaddingRowsReachNoResult) {
  NEED_SM90();
  for (MoeOrder o : {MoeOrder::kExpertWave, MoeOrder::kInterleaved})
    for (int fmt = 0; fmt < 3; ++fmt) {
      Case c{1, 642, 512, 256, 8, 1, Route::kTileEdges, o};
      c.int4 = fmt == 1;
      c.bf16 = fmt == 2;
      c.check_padding = true;
      run_case(c);
      c.world = 2;
      c.tokens = 321;
      c.cluster = 1;
      run_case(c);
    }
}

// The same on skewed routings over emulated P = 4 and 8, two calls on one workspace (the second on a new routing);
// small enough for compute-sanitizer.
TEST(MoeLayerGpu, PaddingRowsEmulatedRanks) {
  NEED_SM90();
  for (int P : {4, 8}) {
    Case c{P, 96, 256, 256, 16, 4, Route::kSkewed, MoeOrder::kInterleaved};
    c.check_padding = true;
    c.calls = 2;
    run_case(c);
  }
}

TEST(MoeLayerGpu, InterleavedOrder) {
  NEED_SM90();
  run_case({2, 256, 512, 256, 16, 4, Route::kSkewed, MoeOrder::kInterleaved});
  run_case({1, 64, 256, 256, 8, 2, Route::kBalanced, MoeOrder::kInterleaved});
}

// CTA pairs (A operand multicast into both CTAs of a cluster) against single CTAs, bit for bit, and both against
// the reference: every format, both orders, P = 1 and emulated P = 2, 4, 8 (pairs of one rank's CTAs).
TEST(MoeLayerGpu, CtaPairsEqualSingleCtas) {
  NEED_SM90();
  for (MoeOrder o : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    Case a{1, 100, 512, 256, 16, 4, Route::kSkewed, o};
    a.cluster = 2;
    a.check_single = true;
    a.check_loads = true;
    run_case(a);
    Case b{4, 256, 256, 256, 8, 2, Route::kSkewed, o};
    b.cluster = 2;
    b.check_single = true;
    run_case(b);
  }
  Case c{8, 512, 512, 256, 16, 2, Route::kBalanced};
  c.cluster = 2;
  c.check_single = true;
  run_case(c);
  Case d{2, 128, 512, 256, 16, 4, Route::kSkewed, MoeOrder::kInterleaved};
  d.int4 = true;
  d.cluster = 2;
  d.check_single = true;
  run_case(d);
  Case e{2, 96, 256, 512, 8, 2, Route::kFirstRankOnly};  // idle rank, empty experts
  e.bf16 = true;
  e.cluster = 2;
  e.check_single = true;
  run_case(e);
}

// The smallest pair case (one rank, a few tiles): the sanitizers' case for the pair path.
TEST(MoeLayerGpu, CtaPairsSingleRank) {
  NEED_SM90();
  Case a{1, 64, 256, 256, 8, 2};
  a.cluster = 2;
  a.check_single = true;
  run_case(a);
}

// Single CTAs (cluster 1) still correct on their own (auto would pick pairs for these shapes).
TEST(MoeLayerGpu, SingleCtas) {
  NEED_SM90();
  Case a{2, 128, 512, 256, 16, 4};
  a.cluster = 1;
  run_case(a);
  Case b{1, 64, 256, 256, 8, 2, Route::kBalanced, MoeOrder::kInterleaved};
  b.cluster = 1;
  run_case(b);
}

// W4A8: int4 weights in the fragment layout, every tile computed transposed (the weights expanded in registers as
// wgmma's A operand), per-(row of W) group scales.
TEST(MoeLayerGpu, W4A8SingleRank) {
  NEED_SM90();
  Case c{1, 100, 512, 256, 16, 4, Route::kSkewed};
  c.int4 = true;
  run_case(c);
}

TEST(MoeLayerGpu, W4A8Emulated) {
  NEED_SM90();
  Case c{4, 128, 256, 384, 8, 2, Route::kBalanced};
  c.int4 = true;
  run_case(c);
  Case d{2, 128, 512, 256, 16, 4, Route::kSkewed, MoeOrder::kInterleaved};
  d.int4 = true;
  run_case(d);
}

// pack_int4_weights (the device packing users run once) equals quant.hpp's host packing into the fragment layout,
// matrix by matrix, out of place into a poisoned buffer and in place; a -8 is a UsageError naming its matrix and
// element, with nothing written; a shape that is not whole 64 x 128 blocks is one naming the shape.
TEST(MoeLayerGpu, PackInt4WeightsOnDevice) {
  NEED_SM90();
  using xstage::testing::usage_error;
  const int M = 3, R = 192, K = 384;  // three matrices of 3 x 3 blocks
  const size_t per = size_t(R) * K / 2, bytes = M * per;
  std::vector<uint8_t> twos(bytes);
  uint32_t x = test_seed() | 1u;
  auto nib = [&] {  // a nibble in [0, 15] other than 8 (-8): values [-7, 7]
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    const uint32_t n = x % 15u;
    return n >= 8 ? n + 1 : n;
  };
  for (uint8_t& b : twos) b = uint8_t(nib() | (nib() << 4));
  std::vector<uint8_t> want;
  for (int m = 0; m < M; ++m) {
    const std::vector<uint8_t> one = moe::pack_int4_frag(twos.data() + m * per, R, K);
    want.insert(want.end(), one.begin(), one.end());
  }
  DevBuf din(bytes), dout(bytes);
  CUDA_CHECK(cudaMemcpy(din.p, twos.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout.p, 0xA5, bytes));
  moe_kernel::pack_int4_weights(din.p, dout.p, M, R, K);
  std::vector<uint8_t> got(bytes);
  CUDA_CHECK(cudaMemcpy(got.data(), dout.p, bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(got == want) << "out of place";
  moe_kernel::pack_int4_weights(din.p, din.p, M, R, K);
  CUDA_CHECK(cudaMemcpy(got.data(), din.p, bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(got == want) << "in place";

  // Matrix 1, element (70, 131): byte 70 * 192 + 65, high nibble; a later -8 too: the first one is named.
  twos[per + 70 * (K / 2) + 65] = uint8_t((twos[per + 70 * (K / 2) + 65] & 0x0F) | 0x80);
  twos[2 * per + 5] = uint8_t((twos[2 * per + 5] & 0xF0) | 0x08);
  CUDA_CHECK(cudaMemcpy(din.p, twos.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout.p, 0xA5, bytes));
  const std::string msg = usage_error([&] { moe_kernel::pack_int4_weights(din.p, dout.p, M, R, K); });
  EXPECT_NE(msg.find("matrix 1 element (70, 131) is -8"), std::string::npos) << msg;
  CUDA_CHECK(cudaMemcpy(got.data(), dout.p, bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t b) { return b == 0xA5; })) << "nothing written";
  EXPECT_NE(usage_error([&] { moe_kernel::pack_int4_weights(din.p, dout.p, 1, 96, 128); }).find("1 matrices of 96 x 128"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { moe_kernel::pack_int4_weights(din.p, dout.p, 1, 64, 192); }).find("64 x 192"),
            std::string::npos);
}

// CTA pairs sharing the weights (pair_share 2 and 3) against single CTAs: experts with 1-6 row tiles (odd counts,
// rows of 65 and 64 tokens: full with full, full with half, a last row alone), empty experts; W8A8 and W4A8, both
// orders, P = 1 and emulated P = 2.
TEST(MoeLayerGpu, PairShareEqualSingleCtas) {
  NEED_SM90();
  for (bool int4 : {false, true})
    for (MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
      Case t{2, 300, 512, 256, 8, 1, Route::kTileEdges, order};  // 1 or 2 row tiles per expert, an expert with 0
      t.int4 = int4;
      t.cluster = 1;
      t.check_pair_share = true;
      t.check_loads = true;
      run_case(t);
      Case b{1, 700, 512, 256, 4, 2, Route::kSkewed, order};  // 2-6 row tiles per expert
      b.int4 = int4;
      b.cluster = 1;
      b.check_pair_share = true;
      run_case(b);
    }
}

// The same with the MMA warpgroups' turn (pingpong 1) on top (W8A8, traced too). A test of its own because racecheck
// cannot follow the turn's bar.arrive around the half tiles' amax exchange (docs/MOE.md, s24): run the sanitizer
// without it.
TEST(MoeLayerGpu, PairShareWithPingpong) {
  NEED_SM90();
  for (MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    Case b{1, 700, 512, 256, 4, 2, Route::kSkewed, order};
    b.cluster = 1;
    b.check_pair_share = true;
    b.pair_share_pingpong = true;
    run_case(b);
  }
}

// W4A8 where most experts get no tokens and ranks receive nothing, over two calls on one workspace; single CTAs and
// pairs, both orders; then half tiles (tile edges) and an expert with no rows.
TEST(MoeLayerGpu, W4A8EmptyExpertsAndRepeatedCalls) {
  NEED_SM90();
  for (MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved})
    for (int cluster : {1, 2}) {
      Case c{4, 96, 512, 256, 32, 2, Route::kFirstRankOnly, order};
      c.int4 = true;
      c.cluster = cluster;
      c.calls = 2;
      run_case(c);
    }
  Case t{2, 300, 512, 256, 8, 1, Route::kTileEdges, MoeOrder::kInterleaved};  // half tiles, an expert with 0 rows
  t.int4 = true;
  run_case(t);
}

// Every tile width of W4A8's swapped mainloop, N = 128, 64 and 32 (a quarter tile), with their edges (16 / 17 and
// 32 / 33 rows, alone and as a second row tile's tail), both orders, P = 1 and emulated P = 2, single CTAs against
// pairs (bit for bit).
TEST(MoeLayerGpu, W4A8EveryTileWidth) {
  NEED_SM90();
  for (MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    Case w{1, 1046, 512, 256, 16, 1, Route::kTileEdges, order};  // tile_edges' 14 counts (1045 rows), then 1 row
    w.int4 = true;
    w.check_single = true;
    run_case(w);
    w.world = 2;
    w.tokens = 523;
    run_case(w);
  }
}

// bf16 (reference runs): bf16 activations and weights, fp32 accumulation, h in bf16, against
// MoeReference(Bf16). Partial last tiles and skew; then idle ranks and empty experts over two calls on one
// workspace (epochs, a new routing per call).
TEST(MoeLayerGpu, Bf16SingleRank) {
  NEED_SM90();
  Case c{1, 100, 512, 256, 16, 4, Route::kSkewed};
  c.bf16 = true;
  run_case(c);
  Case d{1, 64, 256, 384, 8, 2, Route::kBalanced, MoeOrder::kInterleaved};
  d.bf16 = true;
  run_case(d);
}

TEST(MoeLayerGpu, Bf16EmptyExpertsAndIdleRanks) {
  NEED_SM90();
  Case c{2, 64, 256, 256, 8, 2, Route::kFirstRankOnly, MoeOrder::kExpertWave, 2};
  c.bf16 = true;
  run_case(c);
}

// One global batch on P = 1, then split over emulated P = 2, 4, 8: correct at P = 1 and bit-identical at
// every P (every expert sees the same rows in the same order; a row's result depends on nothing else).
TEST(MoeLayerGpu, Bf16Emulated) {
  NEED_SM90();
  const Bf16Batch b = make_bf16_batch(256, 512, 384, 16, 4, Route::kSkewed, test_seed() + 101);
  const std::vector<float> one = run_bf16_split(b, 1, MoeOrder::kExpertWave);
  check_bf16_batch(b, one, "bf16 P=1 T=256 H=512 I=384 E=16 k=4 skewed");
  for (int P : {2, 4, 8}) {
    SCOPED_TRACE("P = " + std::to_string(P));
    const std::vector<float> split = run_bf16_split(b, P, MoeOrder::kExpertWave);
    EXPECT_EQ(first_difference(split, one, b.hidden), "") << "emulated P = " << P << " differs from P = 1";
  }
}

// Expert-Wave and Interleaved walk the same tiles in another order: outputs bit-identical (P = 2 and 4).
TEST(MoeLayerGpu, Bf16BothOrders) {
  NEED_SM90();
  const Bf16Batch b = make_bf16_batch(256, 256, 256, 16, 4, Route::kBalanced, test_seed() + 202);
  for (int P : {2, 4}) {
    SCOPED_TRACE("P = " + std::to_string(P));
    const std::vector<float> wave = run_bf16_split(b, P, MoeOrder::kExpertWave);
    const std::vector<float> inter = run_bf16_split(b, P, MoeOrder::kInterleaved);
    check_bf16_batch(b, wave, "bf16 P=" + std::to_string(P) + " T=256 H=256 I=256 E=16 k=4 balanced, wave");
    EXPECT_EQ(first_difference(inter, wave, b.hidden), "") << "interleaved differs from expert-wave";
  }
}

// Several calls on one workspace: signal counters only grow, row readiness is reset per call, and each
// call has a new routing (different receive rows per rank).
// Shapes drawn at random from everything the layer accepts (hidden and inter any multiple of 128, experts any
// multiple of P, top-k anywhere in [1, experts], any token count), with every format, both orders, single CTAs or
// auto pairs, P = 1 and emulated P = 2, 4, 8, and every routing kind: the fixed shapes above are powers of two and
// the grid's are the models', so odd N-tile counts, one-tile layers, top-k near the expert count and a handful of
// tokens are checked here. Each case is named in the log (name(c)); the draw is fixed by XSTAGE_TEST_SEED. The host
// references bound a case's size (~0.4 GFLOP each).
TEST(MoeLayerGpu, RandomValidShapes) {
  NEED_SM90();
  std::mt19937 rng(test_seed() + 4099u);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int formats[3] = {0, 0, 0}, worlds[4] = {0, 0, 0, 0};
  for (int i = 0; i < 30; ++i) {
    const int lp = pick(0, 3), P = 1 << lp;
    const int H = 128 * pick(1, 12), I = 128 * pick(1, 8);
    const int E = P * pick(1, std::max(1, 48 / P));
    const int K = pick(1, std::min(E, 16));
    // Keep the weights (3 H I E floats on the host, twice) and the references' work bounded.
    if (3.0 * H * I * E > 24e6) { --i; continue; }
    const int t_max = std::max(1, int(std::min(160.0, 4e8 / (6.0 * H * I * K * P))));
    const int T = pick(1, t_max);
    const Route route = Route(pick(0, 2));  // balanced, skewed, first rank only
    Case c{P, T, H, I, E, K, route, pick(0, 1) ? MoeOrder::kInterleaved : MoeOrder::kExpertWave};
    const int format = pick(0, 2);  // W8A8, W4A8, bf16
    c.int4 = format == 1;
    c.bf16 = format == 2;
    c.cluster = pick(0, 1);  // auto (pairs where the N-tile counts are even) or single CTAs
    c.calls = pick(0, 3) == 0 ? 2 : 1;
    ++formats[format];
    ++worlds[lp];
    run_case(c);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("random shapes: W8A8 %d, W4A8 %d, bf16 %d; P = 1: %d, 2: %d, 4: %d, 8: %d\n", formats[0], formats[1],
              formats[2], worlds[0], worlds[1], worlds[2], worlds[3]);
}

TEST(MoeLayerGpu, RepeatedCalls) {
  NEED_SM90();
  run_case({4, 128, 256, 256, 8, 2, Route::kBalanced, MoeOrder::kExpertWave, 3});
}

// The per-tile trace: one record per tile of the schedule (every row's L1 and L2 tiles exactly once), with
// ordered stamps, and the traced kernel's output equal to the untraced one bit for bit; with every pair_share mode.
TEST(MoeLayerGpu, TraceRecordsEveryTile) {
  NEED_SM90();
  const int P = 2, T = 256, H = 256, I = 256, E = 8, K = 2;
  auto team = runtime::Team::emulated(P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape);
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, test_seed());
  const moe::Routing routing = moe::generate_routing({P, T, E, K, moe::RoutingKind::Skewed, 1.0, test_seed()});
  const std::vector<float> x = moe::random_activations(size_t(P) * T * H, test_seed() + 1);
  W8A8Layer L(w, shape, P, x, routing, 2);
  moe_kernel::MoeLayerParams& prm = L.prm;
  const auto& d_out = L.out[0];
  const auto& d_out2 = L.out[1];
  // Weight-sharing pairs remap the positions of an expert's row pairs to other (row, N tile) tiles: every tile must
  // still run exactly once. (pair_share 0 here: auto, on these small experts the A-sharing pairs or single CTAs.)
  for (int share : {moe_kernel::kPairShareAuto, moe_kernel::kPairShareA, moe_kernel::kPairShareWeightsFull,
                    moe_kernel::kPairShareWeights})
  for (MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    SCOPED_TRACE("pair_share " + std::to_string(share));
    prm.order = order;
    prm.trace = false;
    prm.pair_share = share;
    prm.cluster = share == moe_kernel::kPairShareAuto ? 0 : 2;
    for (int r = 0; r < P; ++r) {  // both outputs poisoned (NaN): equal outputs must be written ones
      fill_now(d_out[r]->p, 0xFF, size_t(T) * H * 4);
      fill_now(d_out2[r]->p, 0xFF, size_t(T) * H * 4);
    }
    moe_kernel::run_moe_layer(*team, ws, prm, team->stream());
    moe_kernel::MoeLayerParams traced = prm;
    traced.trace = true;
    for (int r = 0; r < P; ++r) traced.rank[r].out = static_cast<float*>(d_out2[r]->p);
    moe_kernel::launch_moe_layer(*team, ws, traced, team->stream());
    ws.check(*team, "traced launch");
    const std::vector<moe_kernel::MoeTileTrace> tr = ws.read_trace(*team);
    // expected tiles: per rank, rows x (I/128 + H/128)
    const moe::DispatchPlan plan(routing.index, T, K, moe::make_placement(E, P), 128);
    size_t expected = 0;
    std::vector<std::vector<int>> seen(P);
    std::vector<std::vector<int>> tokens(P);  // tokens per scheduler row: a row of at most 64 is a half tile
    for (int r = 0; r < P; ++r) {
      const auto lay = plan.layout(r, I / 128, H / 128);
      for (int row = 0; row < lay.view().rows(); ++row) tokens[r].push_back(lay.tokens_in_row(row));
      const int rows = plan.layout(r, I / 128, H / 128).view().rows();
      expected += size_t(rows) * (I / 128 + H / 128);
      seen[r].assign(size_t(rows) * (I / 128 + H / 128), 0);
    }
    ASSERT_EQ(tr.size(), expected);
    for (const auto& t : tr) {
      ASSERT_LT(t.rank, P);
      const size_t id = t.l2 ? size_t(t.row) * (H / 128) + t.n + seen[t.rank].size() / (I / 128 + H / 128) * (I / 128)
                             : size_t(t.row) * (I / 128) + t.n;
      ASSERT_LT(id, seen[t.rank].size());
      ++seen[t.rank][id];
      ASSERT_LT(size_t(t.row), tokens[t.rank].size());
      EXPECT_EQ(t.half, tokens[t.rank][size_t(t.row)] <= 64) << "row " << t.row;
      EXPECT_LE(t.mma_start_ns, t.mma_end_ns);
      EXPECT_LE(t.mma_end_ns, t.epi_start_ns);
      EXPECT_GT(t.mma_cycles, 0u);
      EXPECT_GT(t.epi_read_cycles, 0u);
      if (!t.l2) {
        EXPECT_GE(t.epi_done_cycles, t.epi_read_cycles);
      }
    }
    for (int r = 0; r < P; ++r)
      for (int c : seen[r]) EXPECT_EQ(c, 1);
    for (int r = 0; r < P; ++r) {
      std::vector<float> a(size_t(T) * H), b(size_t(T) * H);
      CUDA_CHECK(cudaMemcpy(a.data(), d_out[r]->p, a.size() * 4, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(b.data(), d_out2[r]->p, b.size() * 4, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "rank " << r;
      EXPECT_EQ(std::count_if(a.begin(), a.end(), [](float v) { return std::isnan(v); }), 0)
          << "rank " << r << ": outputs left poisoned (every token is routed, so every row is written)";
    }
  }
}

// Host-side validation (no launch; needs a device only for the team).
TEST(MoeLayerGpu, RejectsBadInput) {
  // (check_moe_shape alone needs no device: tests/moe_gpu/test_moe_shapes.cpp, label cpu.)
  NEED_SM90();
  auto team = runtime::Team::emulated(2);
  const moe_kernel::MoeShape shape{256, 256, 8, 2, 16};
  moe_kernel::MoeWorkspace ws(*team, shape);
  moe_kernel::MoeLayerParams prm;
  prm.shape = shape;
  EXPECT_THROW(moe_kernel::run_moe_layer(*team, ws, prm, team->stream()), UsageError);  // null routing
  EXPECT_THROW(moe_kernel::launch_moe_layer(*team, ws, prm, team->stream()), UsageError);  // nothing prepared
  std::vector<int32_t> index(2 * 16 * 2, 0);
  for (size_t i = 1; i < index.size(); i += 2) index[i] = 1;
  prm.topk_index_all = index.data();
  EXPECT_THROW(moe_kernel::run_moe_layer(*team, ws, prm, team->stream()), UsageError);  // null tensors
  prm.shape.tokens_per_rank = 32;
  EXPECT_THROW(moe_kernel::run_moe_layer(*team, ws, prm, team->stream()), UsageError);  // shape != workspace
  // The routing: exactly one of the host array and every local rank's device array.
  using xstage::testing::usage_error;
  DevBuf d_x(16 * 256), d_xs(16 * 2 * 4), d_wt(16 * 2 * 4), d_out(16 * 256 * 4), d_idx(16 * 2 * 4),
      d_w1(size_t(8) * 512 * 256), d_w2(size_t(8) * 256 * 256), d_s1(8 * 4 * 2 * 4), d_s2(8 * 2 * 2 * 4);
  moe_kernel::MoeLayerParams q;
  q.shape = shape;
  q.w1 = d_w1.p;
  q.w2 = d_w2.p;
  q.w1_scale = static_cast<const float*>(d_s1.p);
  q.w2_scale = static_cast<const float*>(d_s2.p);
  for (int r = 0; r < 2; ++r)
    q.rank[r] = {d_x.p, static_cast<const float*>(d_xs.p), static_cast<const float*>(d_wt.p),
                 static_cast<float*>(d_out.p)};
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); }).find("no routing"),
            std::string::npos);
  q.rank[1].topk_index = static_cast<const int32_t*>(d_idx.p);
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); }).find("1 of 2 local ranks"),
            std::string::npos);
  q.topk_index_all = index.data();
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); }).find("given twice"),
            std::string::npos);
  q.topk_index_all = nullptr;
  q.rank[0].topk_index = static_cast<const int32_t*>(d_idx.p);
  q.row_order = 1;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); }).find("row_order 1"),
            std::string::npos);
  q.row_order = 0;
  q.rank[0].topk_index = reinterpret_cast<const int32_t*>(static_cast<const char*>(d_idx.p) + 2);
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); }).find("4-byte aligned"),
            std::string::npos);
  q.rank[0].topk_index = static_cast<const int32_t*>(d_idx.p);
  q.rank[1].out = static_cast<float*>(d_out.p) + 1;  // the weighted sum stores 16 bytes at a time
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); })
                .find("local rank 1: out must be 16-byte aligned"),
            std::string::npos);
  q.rank[1].out = static_cast<float*>(d_out.p);
  q.rank[0].topk_weight = reinterpret_cast<const float*>(static_cast<const char*>(d_wt.p) + 2);
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); })
                .find("local rank 0: x_scale and topk_weight must be 4-byte aligned"),
            std::string::npos);
  q.rank[0].topk_weight = static_cast<const float*>(d_wt.p);
  // A host plan on a stream capturing a CUDA graph: refused by name (a replay would not read the host routing again).
  q.rank[0].topk_index = q.rank[1].topk_index = nullptr;
  q.topk_index_all = index.data();
  cudaStream_t cap = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
  const std::string captured = usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, cap); });
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(cap, &graph));
  if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(cap));
  EXPECT_NE(captured.find("capturing a CUDA graph"), std::string::npos) << captured;
}

// A call with the routing on the device captured in a CUDA graph once and replayed with new activations and routings
// written into the same buffers: every replay bit-identical to an eager call of the same inputs (both orders, emulated
// P = 2), within the reference's tolerance, and the launch alone of a host-planned routing captured and replayed too.
// With zero_padding each replay zeroes the padding rows of its own routing (read back over stale rows).
TEST(MoeLayerGpu, CapturedCallsReplay) {
  NEED_SM90();
  const int P = 2, T = 96, H = 256, I = 256, E = 8, K = 2;
  const uint32_t seed = test_seed() + 31337u;
  auto team = runtime::Team::emulated(P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape);
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const moe::MoeReference ref8(w, moe::Precision::W8A8), ref32(w, moe::Precision::Fp32);
  auto inputs = [&](uint32_t s, moe::RoutingKind kind) {
    return std::make_pair(moe::random_activations(size_t(P) * T * H, s),
                          moe::generate_routing({P, T, E, K, kind, 1.0, s + 1}));
  };
  auto [x0, r0] = inputs(seed, moe::RoutingKind::Balanced);
  W8A8Layer L(w, shape, P, x0, r0, 2);
  L.use_device_routing();
  cudaStream_t cap = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
  auto read = [&](int set) {
    std::vector<std::vector<float>> o(P, std::vector<float>(size_t(T) * H));
    for (int r = 0; r < P; ++r)
      CUDA_CHECK(cudaMemcpy(o[r].data(), L.out[set][r]->p, o[r].size() * 4, cudaMemcpyDeviceToHost));
    return o;
  };
  long long padding_rows = 0;  // zeroed by replays with zero_padding (each replay's routing has its own)
  for (const int zero_padding : {0, 1})
  for (const MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    SCOPED_TRACE(std::string(order == MoeOrder::kExpertWave ? "expert-wave" : "interleaved") + ", zero_padding " +
                 std::to_string(zero_padding));
    L.prm.order = order;
    L.prm.zero_padding = zero_padding;
    moe_kernel::MoeLayerParams eager = L.prm;  // the same call into the second output set
    for (int r = 0; r < P; ++r) eager.rank[r].out = static_cast<float*>(L.out[1][r]->p);
    moe_kernel::run_moe_layer(*team, ws, L.prm, cap);  // warm-up: the workspace's tables are allocated
    ws.check(*team, "warm-up", cap);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
    moe_kernel::run_moe_layer(*team, ws, L.prm, cap);
    CUDA_CHECK(cudaStreamEndCapture(cap, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("replay " + std::to_string(round));
      auto [x, routing] = inputs(seed + 100u * (round + 1), round == 1 ? moe::RoutingKind::Balanced
                                                                        : moe::RoutingKind::Skewed);
      L.set_inputs(x, routing);
      for (int r = 0; r < P; ++r) {
        fill_now(L.out[0][r]->p, 0xFF, size_t(T) * H * 4);
        fill_now(L.out[1][r]->p, 0xFF, size_t(T) * H * 4);
      }
      moe_kernel::MoeWorkspace::ReceiveRows before;
      if (zero_padding) {  // an earlier call's rows where this routing's tiles load padding: the replay zeroes them
        ws.fill_receive(moe_kernel::MoeReceiveFill::kStale, cap, seed + uint32_t(round));
        before = ws.read_receive(cap);
      }
      CUDA_CHECK(cudaGraphLaunch(exec, cap));
      ws.check(*team, "replay", cap);
      if (zero_padding) {
        padding_rows += check_receive_rows(ws.read_plan_tables(cap), before, ws.read_receive(cap), P, E / P,
                                           ws.rows_capacity(), H, false, true);
        ASSERT_FALSE(::testing::Test::HasFailure());
      }
      moe_kernel::run_moe_layer(*team, ws, eager, cap);
      ws.check(*team, "eager", cap);
      const auto got = read(0), want = read(1);
      ErrorCheck check;
      for (int r = 0; r < P; ++r) {
        ASSERT_EQ(std::memcmp(got[r].data(), want[r].data(), got[r].size() * 4), 0)
            << "rank " << r << ": the replay differs from an eager call of the same inputs";
        const float* xr = x.data() + size_t(r) * T * H;
        check.add(r, got[r], ref8.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K),
                  ref32.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K), H);
      }
      check.finish("captured call, replay " + std::to_string(round));
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
  EXPECT_GT(padding_rows, 0) << "no replay had padding rows to zero";
  L.prm.zero_padding = 0;
  // A host plan prepared outside the graph: its launch alone captured, replayed on that routing.
  L.prm.topk_index_all = L.index.data();
  for (int r = 0; r < P; ++r) L.prm.rank[r].topk_index = nullptr;
  moe_kernel::prepare_moe_layer(*team, ws, L.prm, cap);
  moe_kernel::launch_moe_layer(*team, ws, L.prm, cap);  // eager, into set 0
  ws.check(*team, "host plan, eager", cap);
  const auto want = read(0);
  moe_kernel::MoeLayerParams into1 = L.prm;
  for (int r = 0; r < P; ++r) into1.rank[r].out = static_cast<float*>(L.out[1][r]->p);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
  moe_kernel::launch_moe_layer(*team, ws, into1, cap);
  CUDA_CHECK(cudaStreamEndCapture(cap, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < P; ++r) fill_now(L.out[1][r]->p, 0xFF, size_t(T) * H * 4);
    CUDA_CHECK(cudaGraphLaunch(exec, cap));
    ws.check(*team, "host plan, replayed launch", cap);
    const auto got = read(1);
    for (int r = 0; r < P; ++r)
      EXPECT_EQ(std::memcmp(got[r].data(), want[r].data(), got[r].size() * 4), 0) << "round " << round << " rank " << r;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(cap));
}

// A call with fewer tokens than the workspace's capacity (MoeRankInputs::tokens): ranks with T, none, one and 97 tokens
// over emulated P = 4 (the empty rank's tensors null). Each rank's first n rows against the reference, its rows past n
// untouched (still the poison), and the whole call bit-identical to a P = 1 run of the ranks' tokens concatenated into
// one batch (the same rows reach every expert in the same order); a host plan of equal counts bit-identical to the
// device plan's; the misuses named.
TEST(MoeLayerGpu, FewerTokensThanCapacity) {
  NEED_SM90();
  using xstage::testing::usage_error;
  const int P = 4, T = 160, H = 256, I = 256, E = 16, K = 4;
  const uint32_t seed = test_seed() + 4242u;
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const moe::MoeReference ref8(w, moe::Precision::W8A8), ref32(w, moe::Precision::Fp32);
  auto team = runtime::Team::emulated(P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape);
  for (const moe::RoutingKind kind : {moe::RoutingKind::Balanced, moe::RoutingKind::Skewed}) {
    SCOPED_TRACE(moe::to_string(kind));
    const std::vector<float> x = moe::random_activations(size_t(P) * T * H, seed + 1);
    const moe::Routing r = moe::generate_routing({P, T, E, K, kind, 1.0, seed + 2});
    W8A8Layer L(w, shape, P, x, r, 2);
    L.use_device_routing();
    const int n[P] = {T, 0, 1, 97};
    L.prm.rank[1] = {};  // no tokens: nothing of rank 1 is read (its out buffer stays poisoned)
    for (int g = 0; g < P; ++g) L.prm.rank[g].tokens = n[g];
    // The same tokens as one batch on one rank: rank 0's n[0], then rank 1's n[1], ...
    int total = 0;
    for (int g = 0; g < P; ++g) total += n[g];
    moe::Routing r1{1, total, E, K, {}, {}};
    std::vector<float> x1;
    for (int g = 0; g < P; ++g) {
      r1.index.insert(r1.index.end(), r.rank_index(g), r.rank_index(g) + size_t(n[g]) * K);
      r1.weight.insert(r1.weight.end(), r.rank_weight(g), r.rank_weight(g) + size_t(n[g]) * K);
      x1.insert(x1.end(), x.begin() + size_t(g) * T * H, x.begin() + (size_t(g) * T + n[g]) * H);
    }
    auto one = runtime::Team::emulated(1);
    const moe_kernel::MoeShape shape1{H, I, E, K, total};
    moe_kernel::MoeWorkspace ws1(*one, shape1);
    W8A8Layer L1(w, shape1, 1, x1, r1);
    L1.use_device_routing();
    auto read = [&](const DevBuf& b, size_t rows) {
      std::vector<float> o(rows * H);
      CUDA_CHECK(cudaMemcpy(o.data(), b.p, o.size() * 4, cudaMemcpyDeviceToHost));
      return o;
    };
    for (const MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
      SCOPED_TRACE(order == MoeOrder::kExpertWave ? "expert-wave" : "interleaved");
      L.prm.order = L1.prm.order = order;
      for (int g = 0; g < P; ++g) fill_now(L.out[0][g]->p, 0xFF, size_t(T) * H * 4);
      fill_now(L1.out[0][0]->p, 0xFF, size_t(total) * H * 4);
      moe_kernel::run_moe_layer(*team, ws, L.prm, team->stream());
      ws.check(*team, "fewer tokens", team->stream());
      moe_kernel::run_moe_layer(*one, ws1, L1.prm, one->stream());
      ws1.check(*one, "the same tokens on one rank", one->stream());
      const std::vector<float> whole = read(*L1.out[0][0], size_t(total));
      ErrorCheck check;
      size_t at = 0;
      for (int g = 0; g < P; ++g) {
        const std::vector<float> o = read(*L.out[0][g], size_t(T));
        const size_t used = size_t(n[g]) * H;
        EXPECT_TRUE(same_bytes(o.data(), whole.data() + at, used * 4))
            << "rank " << g << ": its " << n[g] << " rows differ from the one-rank run of the same tokens";
        at += used;
        const std::vector<uint8_t> poison((size_t(T) * H - used) * 4, 0xFF);
        EXPECT_TRUE(same_bytes(o.data() + used, poison.data(), poison.size()))
            << "rank " << g << ": rows past its " << n[g] << " tokens were written";
        if (n[g] == 0) continue;
        const float* xr = x.data() + size_t(g) * T * H;
        const std::vector<float> mine(o.begin(), o.begin() + used);
        check.add(g, mine, ref8.forward(xr, n[g], r.rank_index(g), r.rank_weight(g), K),
                  ref32.forward(xr, n[g], r.rank_index(g), r.rank_weight(g), K), H);
      }
      check.finish("fewer tokens than the capacity");
    }
  }
  // A host plan needs one count on every rank: equal counts give the device plan's bits; different ones are refused.
  const std::vector<float> x = moe::random_activations(size_t(P) * T * H, seed + 3);
  moe::Routing r = moe::generate_routing({P, T, E, K, moe::RoutingKind::Skewed, 1.0, seed + 4});
  W8A8Layer L(w, shape, P, x, r, 2);
  const int m = 77;
  for (int g = 0; g < P; ++g)  // both output sets poisoned (NaN): rows [0, m) must be written, the rest not
    for (int set = 0; set < 2; ++set) fill_now(L.out[size_t(set)][g]->p, 0xFF, size_t(T) * H * 4);
  std::vector<int32_t> all;  // [P][m][k]: each rank's first m tokens
  for (int g = 0; g < P; ++g) {
    all.insert(all.end(), r.rank_index(g), r.rank_index(g) + size_t(m) * K);
    L.prm.rank[g].tokens = m;
    L.prm.rank[g].out = static_cast<float*>(L.out[1][g]->p);
  }
  L.prm.topk_index_all = all.data();
  moe_kernel::run_moe_layer(*team, ws, L.prm, team->stream());
  ws.check(*team, "host plan, 77 tokens each", team->stream());
  moe_kernel::MoeLayerParams dev = L.prm;
  dev.topk_index_all = nullptr;
  for (int g = 0; g < P; ++g) {
    dev.rank[g].topk_index = static_cast<const int32_t*>(L.idx[g]->p);
    dev.rank[g].out = static_cast<float*>(L.out[0][g]->p);
  }
  moe_kernel::run_moe_layer(*team, ws, dev, team->stream());
  ws.check(*team, "device plan, 77 tokens each", team->stream());
  for (int g = 0; g < P; ++g) {
    std::vector<float> a(size_t(m) * H), b(size_t(m) * H);
    CUDA_CHECK(cudaMemcpy(a.data(), L.out[0][g]->p, a.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(b.data(), L.out[1][g]->p, b.size() * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "rank " << g << ": host plan differs from device plan";
    EXPECT_EQ(std::count_if(a.begin(), a.end(), [](float v) { return std::isnan(v); }), 0)
        << "rank " << g << ": a row of the " << m << " tokens left poisoned";
    std::vector<uint8_t> tail((size_t(T) - m) * H * 4);
    const std::vector<uint8_t> poison(tail.size(), 0xFF);
    CUDA_CHECK(cudaMemcpy(tail.data(), static_cast<const float*>(L.out[0][g]->p) + size_t(m) * H, tail.size(),
                          cudaMemcpyDeviceToHost));
    EXPECT_TRUE(same_bytes(tail.data(), poison.data(), tail.size())) << "rank " << g << ": rows past token " << m
                                                                     << " written";
  }
  moe_kernel::MoeLayerParams q = L.prm;
  q.rank[2].tokens = 76;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); })
                .find("needs the same token count on every rank, but local rank 0 passes 77 and local rank 2 passes 76"),
            std::string::npos);
  q = dev;
  q.rank[3].tokens = T + 1;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); })
                .find("local rank 3: tokens = 161 is outside [0, 160]"),
            std::string::npos);
  q.rank[3].tokens = -2;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); })
                .find("tokens = -2 is outside"),
            std::string::npos);
  q = dev;  // prepared for 77 tokens each, launched with 70 on rank 1
  moe_kernel::prepare_moe_layer(*team, ws, q, team->stream());
  q.rank[1].tokens = 70;
  EXPECT_NE(usage_error([&] { moe_kernel::launch_moe_layer(*team, ws, q, team->stream()); })
                .find("local rank 1 launches with tokens = 70, but the routing was prepared for 77"),
            std::string::npos);
  q.rank[1].tokens = 77;
  q.rank[1].topk_index = nullptr;  // a rank with tokens and no routing
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, q, team->stream()); })
                .find("(local rank 1 has none)"),
            std::string::npos);
  ws.check(*team, "after the refused calls", team->stream());
}

// The device plan's tables against the host plan's where the per-expert counters exceed the default 48 KB of dynamic
// shared memory (E = 14336 > 12288 over 8 emulated ranks), skewed and balanced, and with many chunks of tokens. Only
// the plans run (a prepare reads none of the layer's tensors: one small buffer stands in for them).
TEST(MoeLayerGpu, DevicePlanTablesManyExperts) {
  NEED_SM90();
  struct Shape {
    int P, T, E, K;
  };
  for (const Shape sh : {Shape{8, 96, 14336, 8}, Shape{2, 3000, 64, 6}, Shape{1, 1, 4, 4}}) {
    SCOPED_TRACE("P=" + std::to_string(sh.P) + " T=" + std::to_string(sh.T) + " E=" + std::to_string(sh.E));
    auto team = runtime::Team::emulated(sh.P);
    const moe_kernel::MoeShape shape{256, 256, sh.E, sh.K, sh.T};
    moe_kernel::MoeWorkspace ws(*team, shape);
    DevBuf stand_in(256);
    for (const auto kind : {moe::RoutingKind::Skewed, moe::RoutingKind::Balanced}) {
      const moe::Routing r = moe::generate_routing({sh.P, sh.T, sh.E, sh.K, kind, 1.0, test_seed() + 5u});
      moe_kernel::MoeLayerParams host, dev;
      host.shape = dev.shape = shape;
      std::vector<std::unique_ptr<DevBuf>> d_idx;
      for (auto* p : {&host, &dev}) {
        p->w1 = p->w2 = stand_in.p;
        p->w1_scale = p->w2_scale = static_cast<const float*>(stand_in.p);
        for (int g = 0; g < sh.P; ++g)
          p->rank[g] = {stand_in.p, static_cast<const float*>(stand_in.p), static_cast<const float*>(stand_in.p),
                        static_cast<float*>(stand_in.p)};
      }
      host.topk_index_all = r.index.data();
      for (int g = 0; g < sh.P; ++g) {
        d_idx.push_back(std::make_unique<DevBuf>(size_t(sh.T) * sh.K * 4));
        CUDA_CHECK(cudaMemcpy(d_idx[g]->p, r.rank_index(g), size_t(sh.T) * sh.K * 4, cudaMemcpyHostToDevice));
        dev.rank[g].topk_index = static_cast<const int32_t*>(d_idx[g]->p);
      }
      moe_kernel::prepare_moe_layer(*team, ws, host, team->stream());
      const auto a = ws.read_plan_tables(team->stream());
      moe_kernel::prepare_moe_layer(*team, ws, dev, team->stream());
      ws.check(*team, "device plan", team->stream());
      const auto b = ws.read_plan_tables(team->stream());
      EXPECT_EQ(a.counts, b.counts);
      EXPECT_EQ(a.src_base, b.src_base);
      EXPECT_EQ(a.row_offset, b.row_offset);
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.index, b.index);
      EXPECT_EQ(a.pos, b.pos);
    }
  }
}

// The device plan with a bad routing on one rank: MoeWorkspace::check names the entry as the host plan would, that
// rank's output is not written, the other rank's is bit-identical to a valid call's (a token's output depends on its
// own rows only), and the workspace serves the next valid call.
TEST(MoeLayerGpu, DevicePlanRejectsBadRouting) {
  NEED_SM90();
  using xstage::testing::usage_error;
  const int P = 2, T = 64, H = 256, I = 256, E = 16, K = 4;
  const uint32_t seed = test_seed() + 4242u;
  auto team = runtime::Team::emulated(P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape);
  cudaStream_t st = team->stream();
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const moe::Routing routing = moe::generate_routing({P, T, E, K, moe::RoutingKind::Balanced, 1.0, seed});
  const std::vector<float> x = moe::random_activations(size_t(P) * T * H, seed + 1);
  W8A8Layer L(w, shape, P, x, routing);
  L.use_device_routing();
  const moe_kernel::MoeLayerParams& prm = L.prm;
  const auto& d_out = L.out[0];
  const auto& d_idx = L.idx;
  // One call with rank r's (token, slot) set to `value` (none: r < 0); returns every rank's output.
  auto call = [&](int bad_rank, int token, int slot, int value) {
    for (int r = 0; r < P; ++r) {
      std::vector<int32_t> idx(routing.rank_index(r), routing.rank_index(r) + size_t(T) * K);
      if (r == bad_rank) idx[size_t(token) * K + slot] = value;
      CUDA_CHECK(cudaMemcpy(d_idx[r]->p, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
      fill_now(d_out[r]->p, 0xFF, size_t(T) * H * 4);
    }
    ws.poison(st);
    moe_kernel::run_moe_layer(*team, ws, prm, st);
    const std::string err = usage_error([&] { ws.check(*team, "device plan test", st); });
    std::vector<std::vector<float>> outs(P, std::vector<float>(size_t(T) * H));
    for (int r = 0; r < P; ++r)
      CUDA_CHECK(cudaMemcpy(outs[r].data(), d_out[r]->p, size_t(T) * H * 4, cudaMemcpyDeviceToHost));
    return std::make_pair(err, outs);
  };
  const auto [ok_err, good] = call(-1, 0, 0, 0);
  ASSERT_EQ(ok_err, "");
  const moe::MoeReference ref8(w, moe::Precision::W8A8), ref32(w, moe::Precision::Fp32);
  ErrorCheck check;
  for (int r = 0; r < P; ++r) {
    const float* xr = x.data() + size_t(r) * T * H;
    check.add(r, good[r], ref8.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K),
              ref32.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K), H);
  }
  check.finish("device plan, valid routing");
  const std::vector<uint8_t> poison(size_t(T) * H * 4, 0xFF);
  auto untouched = [&](const std::vector<float>& o) { return std::memcmp(o.data(), poison.data(), poison.size()) == 0; };
  auto same = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
  {  // out of range on rank 1
    const auto [err, outs] = call(1, 3, 1, E);
    EXPECT_NE(err.find("top-k indices: rank 1, token 3, slot 1: expert 16 is out of range [0, 16)"), std::string::npos)
        << err;
    EXPECT_TRUE(untouched(outs[1])) << "rank 1's out was written";
    EXPECT_TRUE(same(outs[0], good[0])) << "rank 0's out differs from the valid call's";
  }
  {  // negative, and a repeat later in the same rank: the first (token, slot) is named
    const auto [err, outs] = call(0, 5, 2, -3);
    EXPECT_NE(err.find("rank 0, token 5, slot 2: expert -3 is out of range"), std::string::npos) << err;
    EXPECT_TRUE(untouched(outs[0]));
    EXPECT_TRUE(same(outs[1], good[1]));
  }
  {  // a repeat of an earlier slot
    const int v = routing.rank_index(0)[size_t(7) * K + 0];
    const auto [err, outs] = call(0, 7, 3, v);
    EXPECT_NE(err.find("rank 0, token 7, slot 3: expert " + std::to_string(v) + " repeats slot 0 (a token's experts "
                       "must be distinct)"), std::string::npos) << err;
    EXPECT_TRUE(untouched(outs[0]));
    EXPECT_TRUE(same(outs[1], good[1]));
  }
  const auto [err2, again] = call(-1, 0, 0, 0);  // the workspace serves the next valid call
  EXPECT_EQ(err2, "");
  for (int r = 0; r < P; ++r) EXPECT_TRUE(same(again[r], good[r])) << "rank " << r;
}

// CTA pairs: odd N-tile counts, odd CTAs per rank and unknown cluster sizes are named errors (nothing launched).
TEST(MoeLayerGpu, RejectsBadClusters) {
  NEED_SM90();
  using xstage::testing::usage_error;
  auto team = runtime::Team::emulated(2);
  const int T = 16;
  std::vector<int32_t> index(2 * T * 2, 0);
  for (size_t i = 1; i < index.size(); i += 2) index[i] = 1;
  DevBuf d_x(size_t(T) * 1152), d_xs(size_t(T) * 9 * 4), d_wt(size_t(T) * 2 * 4), d_out(size_t(T) * 1152 * 4),
      d_w1(size_t(8) * 2 * 384 * 1152), d_w2(size_t(8) * 1152 * 384), d_s1(size_t(8) * 6 * 9 * 4), d_s2(size_t(8) * 9 * 3 * 4);
  auto params = [&](const moe_kernel::MoeShape& shape) {
    moe_kernel::MoeLayerParams p;
    p.shape = shape;
    p.topk_index_all = index.data();
    p.w1 = d_w1.p;
    p.w2 = d_w2.p;
    p.w1_scale = static_cast<const float*>(d_s1.p);
    p.w2_scale = static_cast<const float*>(d_s2.p);
    for (int r = 0; r < 2; ++r)
      p.rank[r] = {d_x.p, static_cast<const float*>(d_xs.p), static_cast<const float*>(d_wt.p),
                   static_cast<float*>(d_out.p)};
    return p;
  };
  const moe_kernel::MoeShape odd{1152, 384, 8, 2, T};  // 3 Linear-1 and 9 Linear-2 N tiles
  moe_kernel::MoeWorkspace ws(*team, odd);
  moe_kernel::MoeLayerParams p = params(odd);
  p.cluster = 2;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, p, team->stream()); }).find("Linear-1 has 3"),
            std::string::npos);
  p.cluster = 3;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws, p, team->stream()); }).find("got 3"),
            std::string::npos);
  const moe_kernel::MoeShape even{256, 256, 8, 2, T};
  moe_kernel::MoeWorkspace ws2(*team, even);
  moe_kernel::MoeLayerParams q = params(even);
  q.cluster = 2;
  q.ctas_per_rank = 5;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, q, team->stream()); }).find("even ctas_per_rank, got 5"),
            std::string::npos);
  // the L2 weight prefetch distance is checked with the other launch parameters
  moe_kernel::MoeLayerParams r = params(even);
  for (int bad : {-1, 65})
    EXPECT_NE(usage_error([&] {
                r.l2_prefetch = bad;
                moe_kernel::run_moe_layer(*team, ws2, r, team->stream());
              }).find("l2_prefetch must be in [0, 64] K blocks (0: off), got " + std::to_string(bad)),
              std::string::npos);
  moe_kernel::MoeLayerParams pp = params(even);
  pp.pingpong = 2;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, pp, team->stream()); }).find("pingpong must be 0 or 1, got 2"),
            std::string::npos);
  {  // the 0/1 options, each named with the bad value
    struct Opt {
      const char* name;
      int moe_kernel::MoeLayerParams::*field;
    };
    const Opt opts[] = {{"l2_borrow", &moe_kernel::MoeLayerParams::l2_borrow},
                        {"early_release", &moe_kernel::MoeLayerParams::early_release},
                        {"row_order", &moe_kernel::MoeLayerParams::row_order},
                        {"l2_prefetch_streamed", &moe_kernel::MoeLayerParams::l2_prefetch_streamed},
                        {"half_together", &moe_kernel::MoeLayerParams::half_together},
                        {"half_wide", &moe_kernel::MoeLayerParams::half_wide},
                        {"lean", &moe_kernel::MoeLayerParams::lean},
                        {"a_trim", &moe_kernel::MoeLayerParams::a_trim},
                        {"merge_loads", &moe_kernel::MoeLayerParams::merge_loads},
                        {"zero_padding", &moe_kernel::MoeLayerParams::zero_padding}};
    for (const Opt& o : opts) {
      moe_kernel::MoeLayerParams b = params(even);
      b.*o.field = 2;
      EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, b, team->stream()); })
                    .find(std::string(o.name) + " must be 0 or 1, got 2"),
                std::string::npos)
          << o.name;
    }
  }
  moe_kernel::MoeLayerParams sc = params(even);
  sc.l2_scratches = 3;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, sc, team->stream()); }).find("l2_scratches must be 1 or 2, got 3"),
            std::string::npos);
  for (int bad : {-1, 8}) {
    moe_kernel::MoeLayerParams h = params(even);
    h.l2_hints = bad;
    EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, h, team->stream()); })
                  .find("l2_hints must be a set of MoeL2Hint bits in [0, 7], got " + std::to_string(bad)),
              std::string::npos);
  }
  moe_kernel::MoeLayerParams lag = params(even);
  lag.wave_lag = 2;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, lag, team->stream()); }).find("wave_lag must be 0 or 1, got 2"),
            std::string::npos);
  moe_kernel::MoeLayerParams w = params(even);
  w.l2_cols = 192;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, w, team->stream()); }).find("l2_cols must be 0 (auto), 128 or 256, got 192"),
            std::string::npos);
  {
    moe_kernel::MoeLayerParams pr = params(even);
    pr.pair_share = 4;
    EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, pr, team->stream()); })
                  .find("pair_share must be 0 (auto), 1 (A), 2 (weights of full rows) or 3 (weights), got 4"),
              std::string::npos);
    pr.pair_share = moe_kernel::kPairShareWeightsFull;
    pr.cluster = 1;
    EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, pr, team->stream()); })
                  .find("pair_share 2 is an option of CTA pairs, but this launch runs single CTAs (cluster 1)"),
              std::string::npos);
    pr.cluster = 2;
    pr.order = MoeOrder::kInterleaved;
    pr.lead = 1;
    EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws2, pr, team->stream()); })
                  .find("pair_share 2 needs the interleaved lead D >= 2 (a Linear-2 tile may compute the next row), got 1"),
              std::string::npos);
  }
  {
    // pair_share auto: weight sharing where one expert's Linear-1 weights (2 I H bytes) exceed
    // kPairShareWeightsL2Fraction of the L2 (read from the device, not assumed), else A; never with lead 1
    // (Interleaved) or bf16; nothing with single CTAs.
    int l2 = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, team->device()));
    moe_kernel::MoeLayerParams a = params(even);
    a.weights = MoeWeightFormat::kFp8;
    for (int inter : {256, 1024, 2048, 3072}) {
      a.shape.hidden = 7168;
      a.shape.inter = inter;
      const bool big = 2.0 * inter * 7168 > moe_kernel::kPairShareWeightsL2Fraction * l2;
      a.order = MoeOrder::kExpertWave;
      a.lead = 0;
      EXPECT_EQ(moe_kernel::moe_pair_share(*team, a), big ? moe_kernel::kPairShareWeights : moe_kernel::kPairShareA)
          << "inter " << inter << ", L2 " << l2;
      a.order = MoeOrder::kInterleaved;
      a.lead = 1;
      EXPECT_EQ(moe_kernel::moe_pair_share(*team, a), moe_kernel::kPairShareA) << "inter " << inter;
      a.cluster = 1;
      EXPECT_EQ(moe_kernel::moe_pair_share(*team, a), 0) << "single CTAs";
      a.cluster = 0;
    }
  }
  // hidden 1152 in 256-column Linear-2 tiles: 5 tiles, the last ragged, an odd count for pairs (and 9 of 128).
  const moe_kernel::MoeShape odd4{1152, 512, 8, 2, T};  // 4 Linear-1 tiles: only Linear-2's count is odd
  moe_kernel::MoeWorkspace ws4(*team, odd4);
  moe_kernel::MoeLayerParams wo = params(odd4);
  EXPECT_EQ(moe_kernel::moe_l2_cols(wo), 128);  // auto keeps 128 where 256 would be ragged
  wo.l2_cols = 256;
  wo.cluster = 2;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws4, wo, team->stream()); })
                .find("Linear-2 5 (hidden 1152 in tiles of 256 columns)"),
            std::string::npos);
  wo.l2_cols = 128;
  EXPECT_NE(usage_error([&] { moe_kernel::run_moe_layer(*team, ws4, wo, team->stream()); })
                .find("Linear-2 9 (hidden 1152 in tiles of 128 columns)"),
            std::string::npos);
  CUDA_CHECK(cudaDeviceSynchronize());
}

// bf16 misuse: a workspace of the other row format, scales given, tensors missing, the trace, unknown formats.
// Each is a UsageError naming the value (validation only: nothing is launched).
TEST(MoeLayerGpu, Bf16RejectsBadInput) {
  NEED_SM90();
  using xstage::testing::usage_error;
  auto team = runtime::Team::emulated(2);
  const int T = 16, H = 256, I = 256, E = 8, K = 2;
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws8(*team, shape);  // FP8 rows (the default)
  moe_kernel::MoeWorkspace ws16(*team, shape, MoeWeightFormat::kBf16);
  EXPECT_FALSE(ws8.bf16_rows());
  EXPECT_TRUE(ws16.bf16_rows());
  EXPECT_NE(usage_error([&] { moe_kernel::MoeWorkspace bad(*team, shape, MoeWeightFormat(5)); })
                .find("unknown weight format 5"),
            std::string::npos);
  DevBuf d_x(size_t(T) * H * 2), d_xs(size_t(T) * (H / 128) * 4), d_wt(size_t(T) * K * 4), d_out(size_t(T) * H * 4),
      d_w1(size_t(E) * 2 * I * H * 2), d_w2(size_t(E) * H * I * 2), d_s(4096);
  std::vector<int32_t> index(2 * T * K, 0);
  for (size_t i = 1; i < index.size(); i += 2) index[i] = 1;
  moe_kernel::MoeLayerParams good;
  good.shape = shape;
  good.topk_index_all = index.data();
  good.weights = MoeWeightFormat::kBf16;
  good.w1 = d_w1.p;
  good.w2 = d_w2.p;
  for (int r = 0; r < 2; ++r) {
    good.rank[r].x = static_cast<const uint16_t*>(d_x.p) + r * 8;  // 16-byte aligned
    good.rank[r].topk_weight = static_cast<const float*>(d_wt.p);
    good.rank[r].out = static_cast<float*>(d_out.p);
  }
  auto prepare = [&](moe_kernel::MoeWorkspace& ws, const moe_kernel::MoeLayerParams& p) {
    return usage_error([&] { moe_kernel::prepare_moe_layer(*team, ws, p, team->stream()); });
  };
  EXPECT_EQ(prepare(ws16, good), "");  // the valid call passes validation (and builds the plan)
  // bf16 params on an FP8 workspace, FP8 params on a bf16 workspace
  const std::string wrong_ws = prepare(ws8, good);
  EXPECT_NE(wrong_ws.find("weights = kBf16 needs a workspace with bf16"), std::string::npos) << wrong_ws;
  EXPECT_NE(wrong_ws.find("MoeWeightFormat::kBf16"), std::string::npos) << wrong_ws;
  {
    moe_kernel::MoeLayerParams p = good;
    p.weights = MoeWeightFormat::kFp8;
    p.w1_scale = p.w2_scale = static_cast<const float*>(d_s.p);
    for (int r = 0; r < 2; ++r) p.rank[r].x_scale = static_cast<const float*>(d_xs.p);
    const std::string m = prepare(ws16, p);
    EXPECT_NE(m.find("weights = kFp8 needs a workspace with FP8"), std::string::npos) << m;
    EXPECT_NE(m.find("built for kBf16"), std::string::npos) << m;
  }
  {
    moe_kernel::MoeLayerParams p = good;
    p.rank[1].x_scale = static_cast<const float*>(d_xs.p);
    const std::string m = prepare(ws16, p);
    EXPECT_NE(m.find("local rank 1: x_scale must be null for bf16"), std::string::npos) << m;
  }
  {
    moe_kernel::MoeLayerParams p = good;
    p.w1_scale = static_cast<const float*>(d_s.p);
    const std::string m = prepare(ws16, p);
    EXPECT_NE(m.find("w1_scale and w2_scale must be null"), std::string::npos) << m;
    EXPECT_NE(m.find("got w1_scale set, w2_scale null"), std::string::npos) << m;
  }
  {
    moe_kernel::MoeLayerParams p = good;
    p.w2 = nullptr;
    EXPECT_NE(prepare(ws16, p).find("w1 and w2 must be set"), std::string::npos);
  }
  {
    moe_kernel::MoeLayerParams p = good;
    p.rank[0].x = nullptr;
    EXPECT_NE(prepare(ws16, p).find("local rank 0: x, topk_weight and out must all be set"), std::string::npos);
  }
  {
    moe_kernel::MoeLayerParams p = good;
    p.trace = true;
    EXPECT_NE(prepare(ws16, p).find("trace is compiled for W8A8 only (weights = kBf16 was given)"), std::string::npos);
  }
  {
    moe_kernel::MoeLayerParams p = good;
    p.weights = MoeWeightFormat(7);
    EXPECT_NE(prepare(ws16, p).find("unknown weight format 7"), std::string::npos);
  }
}

// ---------------------------------------------------------------- real ranks (one process per GPU, NCCL windows)
// Each rank of a real team runs the layer on its slice of a global batch (P x T tokens, every rank generates the
// same weights, activations and routing from the seed), several calls on one workspace, both orders, W8A8 and
// W4A8, and then the whole global batch at P = 1 on its own GPU (an emulated team of one, all experts): its output
// rows must equal its slice of that run bit for bit, and the reference of its precision within the file header's
// rms bound. The calls poison the workspace (collective in a real team) and run back to back: a faster peer's
// dispatch must never land in buffers this rank is still poisoning or reading (two H200s, 2026-12-04: before
// MoeWorkspace::poison synchronised the team, poisoned (source, token, slot) entries sent combine stores to wild
// addresses). With one GPU the launch is a world of one (the real code path without a peer).
namespace {
// Experts [e0, e0 + n) of q on the device, in the kernel's layout.
struct DevWeights {
  std::unique_ptr<DevBuf> w1, w2, s1, s2;
  DevWeights(const QuantWeights& q, int E, int e0, int n) {
    const size_t b1 = q.w1.size() / E, b2 = q.w2.size() / E, c1 = q.s1.size() / E, c2 = q.s2.size() / E;
    w1 = std::make_unique<DevBuf>(b1 * n);
    w2 = std::make_unique<DevBuf>(b2 * n);
    s1 = std::make_unique<DevBuf>(c1 * n * 4);
    s2 = std::make_unique<DevBuf>(c2 * n * 4);
    CUDA_CHECK(cudaMemcpy(w1->p, q.w1.data() + b1 * e0, b1 * n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(w2->p, q.w2.data() + b2 * e0, b2 * n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s1->p, q.s1.data() + c1 * e0, c1 * n * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s2->p, q.s2.data() + c2 * e0, c2 * n * 4, cudaMemcpyHostToDevice));
  }
};

int scenario_moe_real() {
  return with_real_team(60, [](runtime::Team& team, runtime::Communicator& comm) {
    const int P = comm.size(), rank = comm.rank();
    const int T = 192, H = 512, I = 256, E = 4 * P, K = 2, El = E / P;
    const uint32_t seed = test_seed() + 4242u;
    const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
    int failures = 0;
    for (const bool int4 : {false, true}) {
      const QuantWeights q = quantize_experts(w, H, I, E, int4);
      DevWeights mine(q, E, rank * El, El), all(q, E, 0, E);
      if (int4) {  // the fragment layout, in place
        moe_kernel::pack_int4_weights(mine.w1->p, mine.w1->p, El, 2 * I, H);
        moe_kernel::pack_int4_weights(mine.w2->p, mine.w2->p, El, H, I);
        moe_kernel::pack_int4_weights(all.w1->p, all.w1->p, E, 2 * I, H);
        moe_kernel::pack_int4_weights(all.w2->p, all.w2->p, E, H, I);
      }
      const moe::MoeReference refp(w, int4 ? moe::Precision::W4A8 : moe::Precision::W8A8), ref32(w, moe::Precision::Fp32);
      moe_kernel::MoeWorkspace ws(team, {H, I, E, K, T}, q.format);
      auto one = runtime::Team::emulated(1);
      moe_kernel::MoeWorkspace ws1(*one, {H, I, E, K, P * T}, q.format);
      DevBuf x_g(size_t(P) * T * H), xs_g(size_t(P) * T * (H / 128) * 4), wt_g(size_t(P) * T * K * 4),
          out_g(size_t(P) * T * H * 4), out(size_t(T) * H * 4), idx_d(size_t(T) * K * 4);
      for (int call = 0; call < 3; ++call) {
        const uint32_t cs = seed + 7919u * call;
        const std::vector<float> x = moe::random_activations(size_t(P) * T * H, cs);
        const moe::Routing routing = moe::generate_routing({P, T, E, K, call == 1 ? moe::RoutingKind::Balanced
                                                                                  : moe::RoutingKind::Skewed, 1.0, cs});
        const moe::Fp8Tensor xq = moe::quantize_act_1x128(x.data(), P * T, H);  // 1x128 blocks never straddle tokens
        CUDA_CHECK(cudaMemcpy(x_g.p, xq.code.data(), xq.code.size(), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(xs_g.p, xq.scale.data(), xq.scale.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(wt_g.p, routing.weight.data(), routing.weight.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(idx_d.p, routing.rank_index(rank), size_t(T) * K * 4, cudaMemcpyHostToDevice));
        // the reference of this rank's tokens
        const float* xr = x.data() + size_t(rank) * T * H;
        const std::vector<float> op = refp.forward(xr, T, routing.rank_index(rank), routing.rank_weight(rank), K);
        const std::vector<float> o32 = ref32.forward(xr, T, routing.rank_index(rank), routing.rank_weight(rank), K);
        // the host plan (every rank's routing on every host) and the device plan (this rank's own, counts exchanged)
        for (int variant = 0; variant < 3; ++variant) {
          const MoeOrder order = variant == 0 ? MoeOrder::kExpertWave : MoeOrder::kInterleaved;
          const bool device_plan = variant == 2;
          const char* oname = variant == 0 ? "expert-wave" : variant == 1 ? "interleaved" : "interleaved, device plan";
          moe_kernel::MoeLayerParams prm;
          prm.shape = {H, I, E, K, T};
          prm.topk_index_all = device_plan ? nullptr : routing.index.data();
          prm.weights = q.format;
          prm.w1 = static_cast<const uint8_t*>(mine.w1->p);
          prm.w1_scale = static_cast<const float*>(mine.s1->p);
          prm.w2 = static_cast<const uint8_t*>(mine.w2->p);
          prm.w2_scale = static_cast<const float*>(mine.s2->p);
          prm.order = order;
          prm.rank[0] = {static_cast<const uint8_t*>(x_g.p) + size_t(rank) * T * H,
                         static_cast<const float*>(xs_g.p) + size_t(rank) * T * (H / 128),
                         static_cast<const float*>(wt_g.p) + size_t(rank) * T * K, static_cast<float*>(out.p),
                         device_plan ? static_cast<const int32_t*>(idx_d.p) : nullptr};
          fill_now(out.p, 0xFF, size_t(T) * H * 4);
          ws.poison(team.stream());
          moe_kernel::run_moe_layer(team, ws, prm, team.stream());
          moe_kernel::launch_moe_layer(team, ws, prm, team.stream());  // again, back to back, no poison between
          ws.check(team, "moe layer, real ranks");
          // the global batch at P = 1 on this GPU
          moe_kernel::MoeLayerParams p1 = prm;
          p1.shape = {H, I, E, K, P * T};
          p1.topk_index_all = routing.index.data();  // the twin plans on the host
          p1.w1 = static_cast<const uint8_t*>(all.w1->p);
          p1.w1_scale = static_cast<const float*>(all.s1->p);
          p1.w2 = static_cast<const uint8_t*>(all.w2->p);
          p1.w2_scale = static_cast<const float*>(all.s2->p);
          p1.rank[0] = {static_cast<const uint8_t*>(x_g.p), static_cast<const float*>(xs_g.p),
                        static_cast<const float*>(wt_g.p), static_cast<float*>(out_g.p)};
          fill_now(out_g.p, 0xFF, size_t(P) * T * H * 4);
          ws1.poison(one->stream());
          moe_kernel::run_moe_layer(*one, ws1, p1, one->stream());
          ws1.check(*one, "moe layer, P = 1 twin");
          std::vector<float> got(size_t(T) * H), twin(size_t(T) * H);
          CUDA_CHECK(cudaMemcpy(got.data(), out.p, got.size() * 4, cudaMemcpyDeviceToHost));
          CUDA_CHECK(cudaMemcpy(twin.data(), static_cast<float*>(out_g.p) + size_t(rank) * T * H, twin.size() * 4,
                                cudaMemcpyDeviceToHost));
          const std::string diff = first_difference(got, twin, H);
          double se_k = 0, se_r = 0;
          long long nan = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            if (!std::isfinite(got[i])) { ++nan; continue; }
            se_k += (double(got[i]) - op[i]) * (double(got[i]) - op[i]);
            se_r += (double(op[i]) - o32[i]) * (double(op[i]) - o32[i]);
          }
          const double ratio = se_r > 0 ? std::sqrt(se_k / se_r) : 0;
          const bool ok = diff.empty() && nan == 0 && ratio <= 0.25;
          failures += ok ? 0 : 1;
          std::printf("rank %d of %d, %s, %s, call %d: %s the P = 1 run of %d tokens%s%s; rms(kernel - ref) / "
                      "rms(ref - fp32) %.3f, NaN %lld\n", rank, P, int4 ? "W4A8" : "W8A8", oname, call,
                      diff.empty() ? "bit-identical to its slice of" : "DIFFERS from its slice of", P * T,
                      diff.empty() ? "" : ", first at ", diff.c_str(), ratio, nan);
        }
      }
    }
    std::fflush(stdout);
    return failures == 0 ? 0 : 1;
  });
}
}  // namespace

TEST(MoeLayerRealChild, Scenario) { child_main({{"moe_real", scenario_moe_real}}); }

TEST(MoeLayerReal, OneRankEqualsOneGpuRun) {  // a real world of one: the NCCL-window path without a peer
  NEED_SM90();
  EXPECT_EQ(run_child_ranks("MoeLayerRealChild.*", "moe_real", 1), 0);
}

TEST(MoeLayerReal, TwoRanksEqualOneGpuRunBitForBit) {
  NEED_SM90();
  NEED_GPUS(2);
  EXPECT_EQ(run_child_ranks("MoeLayerRealChild.*", "moe_real", 2), 0);
}
