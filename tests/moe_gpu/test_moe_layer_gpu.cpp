// GPU tests of the fused MoE layer kernel (W8A8 and W4A8; src/kernels/moe, docs/MOE.md "Fused kernel").
// They skip cleanly without an sm_90 device; results/moe/correctness holds what they printed on an H200.
//
// Each case: random weights and activations (xstage::moe generators), quantized exactly as the kernel
// expects (quantize_weight_128x128, quantize_act_1x128), a routing (balanced, skewed, or hand-made with
// empty experts and ranks receiving nothing), ranks emulated on one GPU (P = 1, 2, 4, 8), every
// workspace buffer and every output poisoned with NaN before the call. The kernel's output is compared
// with MoeReference(W8A8) -- the same quantization -- with tolerances tied to that reference's own error
// against MoeReference(Fp32) (docs/MOE.md: FA3 style):
//   rms(out - ref_w8a8) <= 0.5 * rms(ref_w8a8 - ref_fp32)
//   max|out - ref_w8a8| <= 2 * max|ref_w8a8 - ref_fp32| + 1e-3 * max|ref_fp32|
// and no NaN anywhere (a NaN means an untouched combine entry, a padding row leaking, or a bad scale).
// The first GPU session should print the measured ratios and tighten the factors if they are far below.
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
#include "moe_layer.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/moe/reference.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/runtime/team.hpp"

using namespace xstage;
using namespace xstage::testing_gpu;
using moe_kernel::MoeOrder;

namespace {

enum class Route { kBalanced, kSkewed, kFirstRankOnly };

struct Case {
  int world, tokens, hidden, inter, experts, topk;
  Route route = Route::kBalanced;
  MoeOrder order = MoeOrder::kExpertWave;
  int calls = 1;  // > 1: several calls on one workspace (epochs; a new routing each call)
  bool int4 = false;  // W4A8 weights (int4, per-(row, 128-group) scales) instead of W8A8
};

std::string name(const Case& c) {
  char b[200];
  std::snprintf(b, sizeof b, "P=%d T=%d H=%d I=%d E=%d k=%d route=%d order=%d %s", c.world, c.tokens, c.hidden,
                c.inter, c.experts, c.topk, int(c.route), int(c.order), c.int4 ? "w4a8" : "w8a8");
  return b;
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

struct Error {
  double rms_kernel = 0, rms_ref = 0, max_kernel = 0, max_ref = 0, max_fp32 = 0;
  long long nan = 0;
};

void run_case(const Case& c) {
  const int P = c.world, T = c.tokens, H = c.hidden, I = c.inter, E = c.experts, K = c.topk;
  SCOPED_TRACE(name(c));
  const uint32_t seed = test_seed() + 977u * P + 31u * T + E + K;
  auto team = runtime::Team::emulated(P);
  ASSERT_EQ(team->local_ranks(), P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape);
  cudaStream_t st = team->stream();

  // Weights (all experts: the emulated launch serves every rank), quantized as the kernel reads them.
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  std::vector<uint8_t> w1c, w2c;
  std::vector<float> w1s, w2s;
  // W4A8 scales go to the kernel K-block-major ([K/128][rows] per expert; quantize_int4 gives [rows][K/128]).
  auto kblock_major = [](const moe::Int4Tensor& q, std::vector<float>& out) {
    const int kb = q.cols / q.group;
    for (int b = 0; b < kb; ++b)
      for (int r = 0; r < q.rows; ++r) out.push_back(q.scale[size_t(r) * kb + b]);
  };
  for (int e = 0; e < E; ++e) {
    if (c.int4) {
      const moe::Int4Tensor q1 = moe::quantize_int4(w.w1_of(e), 2 * I, H);
      const moe::Int4Tensor q2 = moe::quantize_int4(w.w2_of(e), H, I);
      w1c.insert(w1c.end(), q1.packed.begin(), q1.packed.end());
      w2c.insert(w2c.end(), q2.packed.begin(), q2.packed.end());
      kblock_major(q1, w1s);
      kblock_major(q2, w2s);
      continue;
    }
    const moe::Fp8Tensor q1 = moe::quantize_weight_128x128(w.w1_of(e), 2 * I, H);
    const moe::Fp8Tensor q2 = moe::quantize_weight_128x128(w.w2_of(e), H, I);
    w1c.insert(w1c.end(), q1.code.begin(), q1.code.end());
    w1s.insert(w1s.end(), q1.scale.begin(), q1.scale.end());
    w2c.insert(w2c.end(), q2.code.begin(), q2.code.end());
    w2s.insert(w2s.end(), q2.scale.begin(), q2.scale.end());
  }
  DevBuf d_w1(w1c.size()), d_w2(w2c.size()), d_w1s(w1s.size() * 4), d_w2s(w2s.size() * 4);
  CUDA_CHECK(cudaMemcpy(d_w1.p, w1c.data(), w1c.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2.p, w2c.data(), w2c.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w1s.p, w1s.data(), w1s.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2s.p, w2s.data(), w2s.size() * 4, cudaMemcpyHostToDevice));
  const moe::MoeReference ref8(w, c.int4 ? moe::Precision::W4A8 : moe::Precision::W8A8), ref32(w, moe::Precision::Fp32);

  // Per-rank device tensors.
  std::vector<std::unique_ptr<DevBuf>> d_x, d_xs, d_wt, d_out;
  for (int r = 0; r < P; ++r) {
    d_x.push_back(std::make_unique<DevBuf>(size_t(T) * H));
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
    else
      routing = moe::generate_routing({P, T, E, K, c.route == Route::kSkewed ? moe::RoutingKind::Skewed
                                                                             : moe::RoutingKind::Balanced,
                                       1.0, cs});
    moe_kernel::MoeLayerParams prm;
    prm.shape = shape;
    prm.topk_index_all = routing.index.data();
    prm.weights = c.int4 ? moe_kernel::MoeWeightFormat::kInt4 : moe_kernel::MoeWeightFormat::kFp8;
    prm.w1 = static_cast<const uint8_t*>(d_w1.p);
    prm.w1_scale = static_cast<const float*>(d_w1s.p);
    prm.w2 = static_cast<const uint8_t*>(d_w2.p);
    prm.w2_scale = static_cast<const float*>(d_w2s.p);
    prm.order = c.order;
    prm.experts_per_wave = 2;
    prm.lead = 1;
    for (int r = 0; r < P; ++r) {
      const moe::Fp8Tensor q = moe::quantize_act_1x128(x.data() + size_t(r) * T * H, T, H);
      CUDA_CHECK(cudaMemcpy(d_x[r]->p, q.code.data(), q.code.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(d_xs[r]->p, q.scale.data(), q.scale.size() * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(d_wt[r]->p, routing.rank_weight(r), size_t(T) * K * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemset(d_out[r]->p, 0xFF, size_t(T) * H * 4));  // NaN
      prm.rank[r].x = static_cast<const uint8_t*>(d_x[r]->p);
      prm.rank[r].x_scale = static_cast<const float*>(d_xs[r]->p);
      prm.rank[r].topk_weight = static_cast<const float*>(d_wt[r]->p);
      prm.rank[r].out = static_cast<float*>(d_out[r]->p);
    }
    ws.poison(st);
    moe_kernel::run_moe_layer(*team, ws, prm, st);
    ws.check(*team, "moe layer test");

    Error err;
    double se_k = 0, se_r = 0;
    size_t n = 0;
    for (int r = 0; r < P; ++r) {
      std::vector<float> out(size_t(T) * H);
      CUDA_CHECK(cudaMemcpy(out.data(), d_out[r]->p, out.size() * 4, cudaMemcpyDeviceToHost));
      const float* xr = x.data() + size_t(r) * T * H;
      const std::vector<float> o8 = ref8.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K);
      const std::vector<float> o32 = ref32.forward(xr, T, routing.rank_index(r), routing.rank_weight(r), K);
      for (size_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(out[i])) {
          if (err.nan++ < 5)
            ADD_FAILURE() << "rank " << r << " token " << i / H << " channel " << i % H << ": " << out[i];
          continue;
        }
        const double dk = double(out[i]) - o8[i], dr = double(o8[i]) - o32[i];
        se_k += dk * dk;
        se_r += dr * dr;
        err.max_kernel = std::max(err.max_kernel, std::fabs(dk));
        err.max_ref = std::max(err.max_ref, std::fabs(dr));
        err.max_fp32 = std::max(err.max_fp32, std::fabs(double(o32[i])));
        ++n;
      }
    }
    err.rms_kernel = n ? std::sqrt(se_k / n) : 0;
    err.rms_ref = n ? std::sqrt(se_r / n) : 0;
    std::printf("%s call %d: rms(kernel - ref) %.3e, rms(ref - fp32) %.3e, max %.3e / %.3e, NaN %lld\n",
                name(c).c_str(), call, err.rms_kernel, err.rms_ref, err.max_kernel, err.max_ref, err.nan);
    EXPECT_EQ(err.nan, 0);
    EXPECT_LE(err.rms_kernel, 0.25 * err.rms_ref);  // measured 0.04-0.09 (results/moe/correctness)
    EXPECT_LE(err.max_kernel, 2 * err.max_ref + 1e-3 * err.max_fp32);
  }
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

TEST(MoeLayerGpu, InterleavedOrder) {
  NEED_SM90();
  run_case({2, 256, 512, 256, 16, 4, Route::kSkewed, MoeOrder::kInterleaved});
  run_case({1, 64, 256, 256, 8, 2, Route::kBalanced, MoeOrder::kInterleaved});
}

// W4A8: int4 weights converted to e4m3 inside the kernel, per-column (row of W) group scales.
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

// Several calls on one workspace: signal counters only grow, row readiness is reset per call, and each
// call has a new routing (different receive rows per rank).
TEST(MoeLayerGpu, RepeatedCalls) {
  NEED_SM90();
  run_case({4, 128, 256, 256, 8, 2, Route::kBalanced, MoeOrder::kExpertWave, 3});
}

// The per-tile trace: one record per tile of the schedule (every row's L1 and L2 tiles exactly once), with
// ordered stamps, and the traced kernel's output equal to the untraced one bit for bit.
TEST(MoeLayerGpu, TraceRecordsEveryTile) {
  NEED_SM90();
  const int P = 2, T = 256, H = 256, I = 256, E = 8, K = 2;
  auto team = runtime::Team::emulated(P);
  const moe_kernel::MoeShape shape{H, I, E, K, T};
  moe_kernel::MoeWorkspace ws(*team, shape);
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, test_seed());
  std::vector<uint8_t> w1c, w2c;
  std::vector<float> w1s, w2s;
  for (int e = 0; e < E; ++e) {
    const moe::Fp8Tensor q1 = moe::quantize_weight_128x128(w.w1_of(e), 2 * I, H);
    const moe::Fp8Tensor q2 = moe::quantize_weight_128x128(w.w2_of(e), H, I);
    w1c.insert(w1c.end(), q1.code.begin(), q1.code.end());
    w1s.insert(w1s.end(), q1.scale.begin(), q1.scale.end());
    w2c.insert(w2c.end(), q2.code.begin(), q2.code.end());
    w2s.insert(w2s.end(), q2.scale.begin(), q2.scale.end());
  }
  DevBuf d_w1(w1c.size()), d_w2(w2c.size()), d_w1s(w1s.size() * 4), d_w2s(w2s.size() * 4);
  CUDA_CHECK(cudaMemcpy(d_w1.p, w1c.data(), w1c.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2.p, w2c.data(), w2c.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w1s.p, w1s.data(), w1s.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w2s.p, w2s.data(), w2s.size() * 4, cudaMemcpyHostToDevice));
  const moe::Routing routing = moe::generate_routing({P, T, E, K, moe::RoutingKind::Skewed, 1.0, test_seed()});
  const std::vector<float> x = moe::random_activations(size_t(P) * T * H, test_seed() + 1);
  std::vector<std::unique_ptr<DevBuf>> d_x, d_xs, d_wt, d_out, d_out2;
  moe_kernel::MoeLayerParams prm;
  prm.shape = shape;
  prm.topk_index_all = routing.index.data();
  prm.w1 = static_cast<const uint8_t*>(d_w1.p);
  prm.w1_scale = static_cast<const float*>(d_w1s.p);
  prm.w2 = static_cast<const uint8_t*>(d_w2.p);
  prm.w2_scale = static_cast<const float*>(d_w2s.p);
  for (int r = 0; r < P; ++r) {
    const moe::Fp8Tensor q = moe::quantize_act_1x128(x.data() + size_t(r) * T * H, T, H);
    d_x.push_back(std::make_unique<DevBuf>(q.code.size()));
    d_xs.push_back(std::make_unique<DevBuf>(q.scale.size() * 4));
    d_wt.push_back(std::make_unique<DevBuf>(size_t(T) * K * 4));
    d_out.push_back(std::make_unique<DevBuf>(size_t(T) * H * 4));
    d_out2.push_back(std::make_unique<DevBuf>(size_t(T) * H * 4));
    CUDA_CHECK(cudaMemcpy(d_x[r]->p, q.code.data(), q.code.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_xs[r]->p, q.scale.data(), q.scale.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_wt[r]->p, routing.rank_weight(r), size_t(T) * K * 4, cudaMemcpyHostToDevice));
    prm.rank[r] = {static_cast<const uint8_t*>(d_x[r]->p), static_cast<const float*>(d_xs[r]->p),
                   static_cast<const float*>(d_wt[r]->p), static_cast<float*>(d_out[r]->p)};
  }
  for (MoeOrder order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    prm.order = order;
    prm.trace = false;
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
    for (int r = 0; r < P; ++r) {
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
      EXPECT_LE(t.mma_start_ns, t.mma_end_ns);
      EXPECT_LE(t.mma_end_ns, t.epi_start_ns);
      EXPECT_GT(t.mma_cycles, 0u);
      EXPECT_GT(t.epi_read_cycles, 0u);
      if (!t.l2) EXPECT_GE(t.epi_done_cycles, t.epi_read_cycles);
    }
    for (int r = 0; r < P; ++r)
      for (int c : seen[r]) EXPECT_EQ(c, 1);
    for (int r = 0; r < P; ++r) {
      std::vector<float> a(size_t(T) * H), b(size_t(T) * H);
      CUDA_CHECK(cudaMemcpy(a.data(), d_out[r]->p, a.size() * 4, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(b.data(), d_out2[r]->p, b.size() * 4, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "rank " << r;
    }
  }
}

// Host-side validation (no launch; needs a device only for the team).
TEST(MoeLayerGpu, RejectsBadInput) {
  EXPECT_NE(moe_kernel::check_moe_shape({200, 256, 8, 2, 64}, 1).find("hidden = 200"), std::string::npos);
  EXPECT_NE(moe_kernel::check_moe_shape({256, 256, 12, 2, 64}, 8).find("experts = 12"), std::string::npos);
  EXPECT_NE(moe_kernel::check_moe_shape({256, 256, 8, 9, 64}, 1).find("topk = 9"), std::string::npos);
  EXPECT_NE(moe_kernel::check_moe_shape({256, 256, 8, 2, 64}, 9).find("world size 9"), std::string::npos);
  EXPECT_EQ(moe_kernel::check_moe_shape({256, 256, 8, 2, 64}, 8), "");
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
}
