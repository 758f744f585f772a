// Host reference of the MoE layer (include/xstage/moe/reference.hpp): hand-checkable small cases, the
// quantized precisions against fp32, and the expert-parallel emulation through the dispatch plan equal
// to the token-by-token reference bit for bit at P = 1, 2, 4, 8.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../model/test_seed.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/reference.hpp"
#include "../common/usage_error.hpp"

using namespace xstage::moe;
using xstage::UsageError;

namespace {
using xstage::testing::usage_error;

// W1 = [gate = a*I; up = b*I], W2 = c*I for hidden = inter = n (one expert).
MoeWeights identity_like(int n, int experts, float a, float b, float c) {
  MoeWeights w;
  w.hidden = w.inter = n;
  w.experts = experts;
  w.w1.assign(std::size_t(experts) * 2 * n * n, 0.0f);
  w.w2.assign(std::size_t(experts) * n * n, 0.0f);
  for (int e = 0; e < experts; ++e)
    for (int i = 0; i < n; ++i) {
      w.w1[(std::size_t(e) * 2 * n + i) * n + i] = a;
      w.w1[(std::size_t(e) * 2 * n + n + i) * n + i] = b;
      w.w2[(std::size_t(e) * n + i) * n + i] = c * float(e + 1);
    }
  return w;
}

double silu(double g) { return g / (1 + std::exp(-g)); }

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / den);
}

}  // namespace

TEST(MoeReference, OneTokenOneExpertByHand) {
  // y = c * silu(a x) * (b x) elementwise, with a = 1, b = 2, c = 1.
  const int n = 128;
  const MoeWeights w = identity_like(n, 1, 1.0f, 2.0f, 1.0f);
  // x = e4m3 values / 128 with amax 3.5 (code 0x7E = 448): 448 / amax = 128 is a power of two, so the
  // W8A8 activation round trip is exact.
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = fp8_e4m3_decode(std::uint8_t((i < 127 ? i : 0x7E) | (i % 2 ? 0x80 : 0))) / 128.0f;
  const std::int32_t idx = 0;
  const float one = 1.0f;
  {
    const MoeReference ref(w, Precision::Fp32, {false});
    const std::vector<float> y = ref.forward(x.data(), 1, &idx, &one, 1);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], silu(x[i]) * 2 * x[i], 1e-6 * (1 + std::fabs(y[i]))) << i;
  }
  {
    // bf16: x and the weights are exact in bf16; h is rounded to bf16, then W2 = I is exact.
    const MoeReference ref(w, Precision::Bf16, {false});
    const std::vector<float> y = ref.forward(x.data(), 1, &idx, &one, 1);
    for (int i = 0; i < n; ++i) EXPECT_EQ(y[i], bf16_round(float(silu(x[i]) * 2 * x[i]))) << i;
  }
  {
    // W8A8: the activation scale is 3.5 / 448 = 2^-7 and x * 128 are e4m3 codes, so the activation round
    // trip is exact; the weight blocks (amax 1 and 2) encode their nonzeros to 448 exactly. Then g = x,
    // u = 2x up to the fp32 scale products, and y = the FP8 1x128 round trip of h.
    const MoeReference ref(w, Precision::W8A8, {false});
    const Fp8Tensor qx = quantize_act_1x128(x.data(), 1, n);
    ASSERT_EQ(qx.scale[0], 0x1p-7f);
    for (int i = 0; i < n; ++i) ASSERT_EQ(qx.dequant(0, i), x[i]) << i;
    std::vector<float> h(n), want(n);
    ref.intermediate_row(0, x.data(), h.data());
    for (int i = 0; i < n; ++i) want[i] = float(silu(x[i]) * 2 * x[i]);
    const Fp8Tensor q = quantize_act_1x128(want.data(), 1, n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(h[i], q.dequant(0, i), 1e-5 * (1 + std::fabs(h[i]))) << i;
    const std::vector<float> y = ref.forward(x.data(), 1, &idx, &one, 1);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], h[i], 1e-5 * (1 + std::fabs(h[i]))) << i;
    // The FP8 round trip of h is visible: not all of y equals the unquantized value.
    int differ = 0;
    for (int i = 0; i < n; ++i) differ += std::fabs(y[i] - want[i]) > 1e-4f * (1 + std::fabs(want[i]));
    EXPECT_GT(differ, 0);
  }
}

TEST(MoeReference, TopkWeightedSumInSlotOrder) {
  // Experts e = 0..3 differ only in W2 = (e + 1) I, so expert e's row is (e + 1) y exactly (one product, rounded
  // once, as below). Three slots whose terms are 1 and ~2^-24 of each other: fp32 addition is not associative
  // there, so the sum in slot order differs from the reversed order somewhere (checked), and the reference must
  // give the slot-order bits (the order the kernel's weighted sum adds in).
  const int n = 128, K = 3;
  const MoeWeights w = identity_like(n, 4, 1.0f, 1.0f, 1.0f);
  std::vector<float> x(2 * n);
  for (int i = 0; i < 2 * n; ++i) x[i] = std::sin(0.1f * i + 0.05f);
  const std::vector<std::int32_t> idx = {0, 1, 3, 3, 1, 0};
  const std::vector<float> wt = {0.7f, 3.1e-8f, 1.3e-8f, 1.3e-8f, 3.1e-8f, 0.7f};
  const MoeReference ref(w, Precision::Fp32, {false});
  const std::vector<float> out = ref.forward(x.data(), 2, idx.data(), wt.data(), K);
  std::vector<float> y(n);
  int order_visible = 0;
  for (int t = 0; t < 2; ++t) {
    ref.expert_row(0, x.data() + t * n, y.data());
    for (int i = 0; i < n; ++i) {
      float term[K];
      for (int j = 0; j < K; ++j) {
        const volatile float row = float(idx[t * K + j] + 1) * y[i];  // volatile: no contraction into an FMA
        term[j] = wt[t * K + j] * row;
      }
      volatile float fwd = 0.0f, rev = 0.0f;
      for (int j = 0; j < K; ++j) fwd = fwd + term[j];
      for (int j = K - 1; j >= 0; --j) rev = rev + term[j];
      order_visible += fwd != rev;
      EXPECT_EQ(out[t * n + i], fwd) << "token " << t << " column " << i;
    }
  }
  EXPECT_GT(order_visible, 0) << "the inputs do not tell slot order from reversed order";
}

TEST(MoeReference, QuantizedPrecisionsStayCloseToFp32) {
  const std::uint64_t seed = test_seed();
  const int H = 256, I = 256, E = 4, T = 24, k = 2;
  const MoeWeights w = random_moe_weights(H, I, E, seed);
  const std::vector<float> x = random_activations(std::size_t(T) * H, seed + 1);
  const Routing r = generate_routing({1, T, E, k, RoutingKind::Balanced, 1.0, seed + 2});
  const std::vector<float> ref32 = MoeReference(w, Precision::Fp32).forward(x.data(), T, r.index.data(), r.weight.data(), k);
  const double bf = rel_rms(MoeReference(w, Precision::Bf16).forward(x.data(), T, r.index.data(), r.weight.data(), k), ref32);
  const double w8 = rel_rms(MoeReference(w, Precision::W8A8).forward(x.data(), T, r.index.data(), r.weight.data(), k), ref32);
  const double w4 = rel_rms(MoeReference(w, Precision::W4A8).forward(x.data(), T, r.index.data(), r.weight.data(), k), ref32);
  std::printf("[ rel rms  ] vs fp32: bf16 %.2e, w8a8 %.2e, w4a8 %.2e (seed %llu)\n", bf, w8, w4, (unsigned long long)seed);
  // bf16 keeps 8 significant bits (2^-9 relative per rounding), e4m3 4 (2^-5), int4 weights ~ 1/14 of
  // the group amax: the errors order that way and stay within a few rounding units.
  EXPECT_GT(bf, 0);
  EXPECT_LT(bf, 0.01);
  EXPECT_LT(bf, w8);
  EXPECT_LT(w8, 0.08);
  EXPECT_LT(w8, w4);
  EXPECT_LT(w4, 0.25);
}

TEST(MoeReference, ExpertParallelEmulationEqualsTheReferenceBitForBit) {
  const std::uint64_t seed = test_seed();
  const int H = 128, I = 128, E = 8, k = 2, tokens = 32;
  const MoeWeights w = random_moe_weights(H, I, E, seed);
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::W8A8, Precision::W4A8})
    for (bool combine_bf16 : {true, false}) {
      const MoeReference ref(w, p, {combine_bf16});
      for (int P : {1, 2, 4, 8})
        for (RoutingKind kind : {RoutingKind::Balanced, RoutingKind::Skewed}) {
          SCOPED_TRACE(std::string(to_string(p)) + (combine_bf16 ? " bf16 combine" : " fp32 combine") + " P " +
                       std::to_string(P) + " " + to_string(kind) + " seed " + std::to_string(seed));
          const int T = tokens / P;
          const Routing r = generate_routing({P, T, E, k, kind, 1.0, seed + P});
          const std::vector<float> x = random_activations(std::size_t(P) * T * H, seed + 7);
          const DispatchPlan plan(r, make_placement(E, P), 64);
          const std::vector<float> ep = moe_forward_ep(ref, plan, r, x);
          const std::vector<float> tok = ref.forward(x.data(), P * T, r.index.data(), r.weight.data(), k);
          ASSERT_EQ(ep.size(), tok.size());
          for (std::size_t i = 0; i < ep.size(); ++i) {
            ASSERT_TRUE(std::isfinite(ep[i])) << i;
            ASSERT_EQ(ep[i], tok[i]) << "element " << i;
          }
        }
    }
}

TEST(MoeReference, EmulationWithEmptyRanksAndExperts) {
  // P = 4, E = 16 (4 per rank): every token to experts 1 and 3 (both on rank 0): ranks 1..3 compute
  // nothing, experts 0, 2 and 4..15 are empty, and no token of ranks 1..3 has a local expert.
  const int P = 4, T = 3, k = 2, E = 16, H = 128;
  Routing r;
  r.world = P;
  r.tokens_per_rank = T;
  r.experts = E;
  r.topk = k;
  for (int i = 0; i < P * T; ++i) {
    r.index.push_back(i % 2 ? 1 : 3);
    r.index.push_back(i % 2 ? 3 : 1);
    r.weight.push_back(0.6f);
    r.weight.push_back(0.4f);
  }
  const MoeWeights w = random_moe_weights(H, 128, E, 3);
  const MoeReference ref(w, Precision::W8A8);
  const std::vector<float> x = random_activations(std::size_t(P) * T * H, 4);
  const DispatchPlan plan(r, make_placement(E, P), 16);
  for (int d = 1; d < P; ++d) EXPECT_EQ(plan.recv_rows(d), 0);
  EXPECT_EQ(plan.local_tokens(0), (std::vector<int>{0, P * T, 0, P * T}));
  const std::vector<float> ep = moe_forward_ep(ref, plan, r, x);
  EXPECT_EQ(ep, ref.forward(x.data(), P * T, r.index.data(), r.weight.data(), k));
}

TEST(MoeReference, BadInputIsAUsageError) {
  const MoeWeights w96 = random_moe_weights(96, 128, 2, 1);
  EXPECT_NE(usage_error([&] { MoeReference(w96, Precision::W8A8); }).find("multiples of 128"), std::string::npos);
  EXPECT_NO_THROW(MoeReference(w96, Precision::Bf16));  // bf16 and fp32 take any shape
  const MoeWeights w = random_moe_weights(128, 128, 2, 1);
  const MoeReference ref(w, Precision::Fp32);
  std::vector<float> x(128, 1.0f), y(128);
  EXPECT_NE(usage_error([&] { ref.expert_row(2, x.data(), y.data()); }).find("expert 2 is out of range [0, 2)"),
            std::string::npos);
  const std::vector<std::int32_t> dup = {1, 1};
  const std::vector<float> wt = {0.5f, 0.5f};
  EXPECT_NE(usage_error([&] { ref.forward(x.data(), 1, dup.data(), wt.data(), 2); }).find("token 0, slot 1: expert 1 repeats"),
            std::string::npos);
  EXPECT_EQ(parse_precision("w4a8"), Precision::W4A8);
  EXPECT_NE(usage_error([] { parse_precision("fp8"); }).find("'fp8'"), std::string::npos);
  const Routing r = generate_routing({2, 2, 2, 1, RoutingKind::Balanced, 1.0, 1});
  const DispatchPlan plan(r, make_placement(2, 2), 1);
  EXPECT_NE(usage_error([&] { moe_forward_ep(ref, plan, r, std::vector<float>(3)); }).find("expected 512 activations"),
            std::string::npos);
}
