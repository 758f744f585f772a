// GPU tests of the unfused MoE baseline and the FP8 ceiling (bench/moe/unfused.hpp), one GPU, P = 1.
// They skip cleanly without an sm_90 device (except the shape checks, which need no device); what they printed
// on H200s is under results/gpu-tests.
//
// End to end: random weights and activations (xstage::moe generators), quantized exactly as the
// baseline expects (W8A8: quantize_weight_128x128; W4A8: quantize_int4; activations quantize_act_1x128),
// balanced / skewed / hand-made routings (experts with zero rows, expert blocks that are not a multiple
// of 4 rows), outputs poisoned with NaN before every call. The output is compared with MoeReference of
// the same precision, with tolerances tied to that reference's own error against MoeReference(Fp32)
// (docs/MOE.md, FA3 style):
//   rms(out - ref_p) <= c * rms(ref_p - ref_fp32)                       (c = 0.5; 0.75 for the fallback)
//   max|out - ref_p| <= 2 * max|ref_p - ref_fp32| + 1e-3 * max|ref_fp32|
// and no NaN. Why the unfused path does not match ref_p bit for bit: cuBLASLt writes the Linear-1 output
// in bf16 and SwiGLU reads it back, where the reference keeps g and u in fp32; the 2^-9 relative
// perturbation moves some h across an e4m3 rounding boundary (a one-step change of a few percent of the
// h codes), and cuBLASLt sums each 128-deep block in its own order. Both are small against the FP8
// quantisation error of the reference itself (~6% relative RMS for W8A8), so c = 0.5 leaves room while
// a wrong scale layout (errors of order 100%) fails by far. The W4A8 128x128 requantisation fallback
// (taken only if cuBLASLt refuses VEC128 weight scales, or when forced) adds one e4m3 rounding of the
// weights that the W4A8 reference does not model: c = 0.75 there. Every case prints its ratios; the
// first GPU session should tighten c if they are far below.
//
// Linear-1 alone (the scale layouts in isolation): the bf16 Linear-1 output of sampled routed rows is
// compared with the reference's block-promoted math, sum_kb (sum_k code_x * code_w) * s_x[kb] * s_w,
// within |err| <= 2^-8 |expected| + 2e-3 * max|row| (bf16 rounding is 2^-9 relative; the absolute term
// covers the limited-precision FP8 accumulation inside a 128-deep block on Hopper); a wrong scale
// layout gives errors of the order of the values themselves. Padding rows must be exactly zero.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/gpu_test.hpp"
#include "unfused.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/moe/reference.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/moe/shapes.hpp"

using namespace xstage;
using namespace xstage::testing_gpu;
namespace mb = xstage::moe_bench;

namespace {

enum class Route { kBalanced, kSkewed, kFewExperts };

struct Case {
  int tokens, hidden, inter, experts, topk;
  Route route = Route::kBalanced;
  mb::WeightFormat format = mb::WeightFormat::kFp8;
  bool force_requant = false;
  int calls = 1;  // > 1: several calls on one object, a new routing (set_routing) each call
};

std::string name(const Case& c) {
  char b[200];
  std::snprintf(b, sizeof b, "%s T=%d H=%d I=%d E=%d k=%d route=%d%s", mb::to_string(c.format), c.tokens, c.hidden,
                c.inter, c.experts, c.topk, int(c.route), c.force_requant ? " forced-requant" : "");
  return b;
}

// Every token to experts 0 .. max(k, 2) - 1 (rotated): the other experts get zero rows.
moe::Routing few_experts(int T, int E, int k, uint32_t seed) {
  moe::Routing r;
  r.world = 1;
  r.tokens_per_rank = T;
  r.experts = E;
  r.topk = k;
  const int used = std::min(E, std::max(k, 2));
  r.index.resize(size_t(T) * k);
  r.weight.resize(r.index.size());
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      r.index[r.at(0, t, j)] = (t + j + int(seed % 5)) % used;
      r.weight[r.at(0, t, j)] = 1.0f / float(k);
    }
  return r;
}

moe::Routing make_routing(const Case& c, uint32_t seed) {
  if (c.route == Route::kFewExperts) return few_experts(c.tokens, c.experts, c.topk, seed);
  return moe::generate_routing({1, c.tokens, c.experts, c.topk,
                                c.route == Route::kSkewed ? moe::RoutingKind::Skewed : moe::RoutingKind::Balanced,
                                1.0, seed});
}

template <class T>
std::unique_ptr<DevBuf> upload(const std::vector<T>& v) {
  auto d = std::make_unique<DevBuf>(std::max<size_t>(v.size() * sizeof(T), 16));
  CUDA_CHECK(cudaMemcpy(d->p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// The weights in the baseline's input format, on the device, and their host quantized forms.
struct Weights {
  std::vector<uint8_t> w1, w2;
  std::vector<float> w1s, w2s;
  std::vector<moe::Fp8Tensor> fp8_w1;  // per expert, the exact FP8 form the GEMM sees (W4A8: int4_to_fp8)
  std::unique_ptr<DevBuf> d_w1, d_w2, d_w1s, d_w2s;
};

Weights make_weights(const moe::MoeWeights& w, mb::WeightFormat f) {
  Weights q;
  const int H = w.hidden, I = w.inter;
  for (int e = 0; e < w.experts; ++e) {
    if (f == mb::WeightFormat::kFp8) {
      moe::Fp8Tensor q1 = moe::quantize_weight_128x128(w.w1_of(e), 2 * I, H);
      const moe::Fp8Tensor q2 = moe::quantize_weight_128x128(w.w2_of(e), H, I);
      q.w1.insert(q.w1.end(), q1.code.begin(), q1.code.end());
      q.w1s.insert(q.w1s.end(), q1.scale.begin(), q1.scale.end());
      q.w2.insert(q.w2.end(), q2.code.begin(), q2.code.end());
      q.w2s.insert(q.w2s.end(), q2.scale.begin(), q2.scale.end());
      q.fp8_w1.push_back(std::move(q1));
    } else {
      const moe::Int4Tensor q1 = moe::quantize_int4(w.w1_of(e), 2 * I, H);
      const moe::Int4Tensor q2 = moe::quantize_int4(w.w2_of(e), H, I);
      q.w1.insert(q.w1.end(), q1.packed.begin(), q1.packed.end());
      q.w1s.insert(q.w1s.end(), q1.scale.begin(), q1.scale.end());
      q.w2.insert(q.w2.end(), q2.packed.begin(), q2.packed.end());
      q.w2s.insert(q.w2s.end(), q2.scale.begin(), q2.scale.end());
      q.fp8_w1.push_back(moe::int4_to_fp8(q1));
    }
  }
  q.d_w1 = upload(q.w1);
  q.d_w2 = upload(q.w2);
  q.d_w1s = upload(q.w1s);
  q.d_w2s = upload(q.w2s);
  return q;
}

void set_weights(mb::UnfusedMoe& moe, const Weights& q) {
  moe.set_weights(static_cast<const uint8_t*>(q.d_w1->p), static_cast<const float*>(q.d_w1s->p),
                  static_cast<const uint8_t*>(q.d_w2->p), static_cast<const float*>(q.d_w2s->p));
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// One call's device inputs.
struct Inputs {
  std::vector<float> x;  // unquantized activations (the references quantize them the same way)
  moe::Fp8Tensor xq;
  moe::Routing routing;
  std::unique_ptr<DevBuf> d_x, d_xs, d_w, d_out;
};

Inputs make_inputs(const Case& c, uint32_t seed) {
  Inputs in;
  in.x = moe::random_activations(size_t(c.tokens) * c.hidden, seed);
  in.xq = moe::quantize_act_1x128(in.x.data(), c.tokens, c.hidden);
  in.routing = make_routing(c, seed);
  in.d_x = upload(in.xq.code);
  in.d_xs = upload(in.xq.scale);
  in.d_w = upload(in.routing.weight);
  in.d_out = std::make_unique<DevBuf>(size_t(c.tokens) * c.hidden * sizeof(float));
  fill_now(in.d_out->p, 0xFF, size_t(c.tokens) * c.hidden * sizeof(float));  // NaN
  return in;
}

void run_layer(mb::UnfusedMoe& moe, Inputs& in, cudaStream_t st) {
  moe.set_routing(in.routing.index.data());
  moe.run(static_cast<const uint8_t*>(in.d_x->p), static_cast<const float*>(in.d_xs->p),
          static_cast<const float*>(in.d_w->p), static_cast<float*>(in.d_out->p), st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaGetLastError());
}

void run_case(const Case& c) {
  SCOPED_TRACE(name(c));
  const int T = c.tokens, H = c.hidden, I = c.inter, E = c.experts, K = c.topk;
  const uint32_t seed = test_seed() + 31u * T + 7u * H + E + K + (c.format == mb::WeightFormat::kInt4 ? 1000u : 0u);
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const Weights q = make_weights(w, c.format);
  const moe::Precision prec = c.format == mb::WeightFormat::kFp8 ? moe::Precision::W8A8 : moe::Precision::W4A8;
  const moe::MoeReference refp(w, prec), ref32(w, moe::Precision::Fp32);

  mb::UnfusedMoe moe({H, I, E, K, T}, c.format, mb::UnfusedOptions{c.force_requant});
  std::printf("%s: int4 path: %s (%s)\n", name(c).c_str(), mb::to_string(moe.int4_path()),
              moe.int4_path_note().c_str());
  if (c.force_requant) {
    EXPECT_EQ(moe.int4_path(), mb::Int4Path::kRequant128x128);
  }
  EXPECT_DOUBLE_EQ(moe.flops(), 6.0 * T * K * double(H) * I);
  set_weights(moe, q);
  Stream st;
  const double c_rms = moe.int4_path() == mb::Int4Path::kRequant128x128 ? 0.75 : 0.5;

  for (int call = 0; call < c.calls; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    Inputs in = make_inputs(c, seed + 7919u * call);
    run_layer(moe, in, st.s);
    int empty = 0, unaligned = 0;
    for (int e = 0; e < E; ++e) {
      empty += moe.expert_rows()[e] == 0;
      unaligned += moe.expert_rows()[e] % mb::kRowAlign != 0;
    }

    std::vector<float> out(size_t(T) * H);
    CUDA_CHECK(cudaMemcpy(out.data(), in.d_out->p, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const std::vector<float> op = refp.forward(in.x.data(), T, in.routing.index.data(), in.routing.weight.data(), K);
    const std::vector<float> o32 = ref32.forward(in.x.data(), T, in.routing.index.data(), in.routing.weight.data(), K);
    double se_k = 0, se_r = 0, max_k = 0, max_r = 0, max32 = 0;
    long long nan = 0;
    size_t n = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(out[i])) {
        if (nan++ < 5) ADD_FAILURE() << "token " << i / H << " channel " << i % H << ": " << out[i];
        continue;
      }
      const double dk = double(out[i]) - op[i], dr = double(op[i]) - o32[i];
      se_k += dk * dk;
      se_r += dr * dr;
      max_k = std::max(max_k, std::fabs(dk));
      max_r = std::max(max_r, std::fabs(dr));
      max32 = std::max(max32, std::fabs(double(o32[i])));
      ++n;
    }
    const double rms_k = n ? std::sqrt(se_k / n) : 0, rms_r = n ? std::sqrt(se_r / n) : 0;
    std::printf(
        "%s call %d: padded rows %d (%d empty experts, %d partial blocks); rms(out - ref) %.3e, rms(ref - fp32) %.3e, "
        "ratio %.3f (limit %.2f); max %.3e / %.3e, ratio %.3f; NaN %lld\n",
        name(c).c_str(), call, moe.padded_rows(), empty, unaligned, rms_k, rms_r, rms_r > 0 ? rms_k / rms_r : 0.0,
        c_rms, max_k, max_r, max_r > 0 ? max_k / max_r : 0.0, nan);
    EXPECT_EQ(nan, 0);
    EXPECT_GT(rms_r, 0.0);
    EXPECT_LE(rms_k, c_rms * rms_r);
    EXPECT_LE(max_k, 2 * max_r + 1e-3 * max32);
  }
}

// Linear-1 of sampled routed rows against the block-promoted math on the same codes and scales.
void check_linear1(mb::WeightFormat format) {
  const int T = 100, H = 512, I = 256, E = 8, K = 2;
  const Case c{T, H, I, E, K, Route::kSkewed, format};
  SCOPED_TRACE(name(c));
  const uint32_t seed = test_seed() + 4242u;
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const Weights q = make_weights(w, format);
  mb::UnfusedMoe moe({H, I, E, K, T}, format);
  std::printf("%s: int4 path: %s\n", name(c).c_str(), mb::to_string(moe.int4_path()));
  if (moe.int4_path() == mb::Int4Path::kRequant128x128)
    GTEST_SKIP() << "the W4A8 weights are requantised (cuBLASLt refused VEC128 weight scales): "
                 << moe.int4_path_note();
  set_weights(moe, q);
  Stream st;
  Inputs in = make_inputs(c, seed);
  moe.set_routing(in.routing.index.data());  // (allocates the intermediates for this routing)
  moe.poison_intermediates(st.s);            // so the padding rows' zeros below are this run's
  run_layer(moe, in, st.s);
  const int rows = moe.padded_rows();
  std::vector<uint16_t> y1(size_t(rows) * 2 * I);
  CUDA_CHECK(cudaMemcpy(y1.data(), moe.linear1_output(), y1.size() * 2, cudaMemcpyDeviceToHost));
  auto bf16 = [](uint16_t b) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  // Padding rows: zero codes times unit scales.
  long long bad_pad = 0;
  for (int e = 0; e < E; ++e)
    for (int p = moe.expert_offsets()[e] + moe.expert_rows()[e]; p < moe.expert_offsets()[e + 1]; ++p)
      for (int col = 0; col < 2 * I; ++col) bad_pad += bf16(y1[size_t(p) * 2 * I + col]) != 0.0f;
  EXPECT_EQ(bad_pad, 0) << "padding rows of the Linear-1 output are not zero";

  long long bad = 0, checked = 0;
  double worst = 0;
  const int KB = H / 128;
  for (int t = 0; t < T; t += 7)
    for (int j = 0; j < K; ++j) {
      const int e = in.routing.index[size_t(t) * K + j];
      const int p = moe.padded_row(t, j);
      ASSERT_GE(p, moe.expert_offsets()[e]);
      ASSERT_LT(p, moe.expert_offsets()[e] + moe.expert_rows()[e]);
      const moe::Fp8Tensor& wq = q.fp8_w1[e];
      std::vector<double> expect(2 * I);
      double amax = 0;
      for (int nn = 0; nn < 2 * I; ++nn) {
        float acc = 0;
        for (int kb = 0; kb < KB; ++kb) {
          float part = 0;
          for (int kk = kb * 128; kk < (kb + 1) * 128; ++kk)
            part += moe::fp8_e4m3_decode(in.xq.code[size_t(t) * H + kk]) *
                    moe::fp8_e4m3_decode(wq.code[size_t(nn) * H + kk]);
          acc += part * (in.xq.scale[size_t(t) * KB + kb] * wq.scale_at(nn, kb * 128));
        }
        expect[nn] = acc;
        amax = std::max(amax, std::fabs(double(acc)));
      }
      for (int nn = 0; nn < 2 * I; ++nn) {
        const double got = bf16(y1[size_t(p) * 2 * I + nn]);
        const double err = std::fabs(got - expect[nn]), tol = std::ldexp(std::fabs(expect[nn]), -8) + 2e-3 * amax;
        worst = std::max(worst, amax > 0 ? err / amax : err);
        ++checked;
        if (!(err <= tol) && bad++ < 5)
          ADD_FAILURE() << "token " << t << " slot " << j << " expert " << e << " column " << nn << ": got " << got
                        << ", expected " << expect[nn];
      }
    }
  std::printf("%s: Linear-1 %lld values checked, %lld outside bf16 tolerance, worst |err| / row max %.3e\n",
              name(c).c_str(), checked, bad, worst);
  EXPECT_EQ(bad, 0);
}

}  // namespace

TEST(UnfusedMoeGpu, W8A8Balanced) {
  NEED_SM90();
  run_case({64, 256, 256, 8, 2});
}

TEST(UnfusedMoeGpu, W8A8SkewedPartialBlocks) {
  NEED_SM90();
  run_case({100, 512, 256, 16, 4, Route::kSkewed});  // expert blocks of any size, likely some empty
}

TEST(UnfusedMoeGpu, W8A8EmptyExperts) {
  NEED_SM90();
  run_case({96, 256, 256, 8, 2, Route::kFewExperts});  // 6 of 8 experts get no rows
}

TEST(UnfusedMoeGpu, W8A8RepeatedCalls) {
  NEED_SM90();
  run_case({512, 512, 256, 16, 2, Route::kSkewed, mb::WeightFormat::kFp8, false, 2});
}

TEST(UnfusedMoeGpu, W4A8Balanced) {
  NEED_SM90();
  run_case({64, 256, 256, 8, 2, Route::kBalanced, mb::WeightFormat::kInt4});
}

TEST(UnfusedMoeGpu, W4A8Skewed) {
  NEED_SM90();
  run_case({256, 512, 256, 16, 4, Route::kSkewed, mb::WeightFormat::kInt4, false, 2});
}

TEST(UnfusedMoeGpu, W4A8RequantFallback) {
  NEED_SM90();
  run_case({128, 256, 256, 8, 2, Route::kBalanced, mb::WeightFormat::kInt4, true});
}

TEST(UnfusedMoeGpu, Linear1MatchesBlockScaledMathW8A8) {
  NEED_SM90();
  check_linear1(mb::WeightFormat::kFp8);
}

TEST(UnfusedMoeGpu, Linear1MatchesBlockScaledMathW4A8) {
  NEED_SM90();
  check_linear1(mb::WeightFormat::kInt4);
}

// The ceiling's two cuBLASLt FP8 GEMMs compute what they are timed for: outputs finite, and sampled outputs equal to
// the float64 dot product of the operands' e4m3 codes times the constant block scales, within bf16's rounding.
TEST(UnfusedMoeGpu, CeilingComputesItsGemms) {
  NEED_SM90();
  const mb::UnfusedShape s{512, 256, 8, 2, 256};
  mb::CeilingGemm ceiling(s);
  const moe::MoeShape ms{"t", s.hidden, s.inter, s.experts, s.topk, ""};
  EXPECT_DOUBLE_EQ(ceiling.flops(), moe::moe_layer_flops(ms, s.tokens));
  EXPECT_EQ(ceiling.rows(), 512);
  Stream st;
  ceiling.run(st.s);
  CUDA_CHECK(cudaStreamSynchronize(st.s));
  const int M = ceiling.rows();
  const double scale = double(mb::CeilingGemm::kWeightScale) * mb::CeilingGemm::kActivationScale;
  for (int which = 0; which < 2; ++which) {
    const int N = which == 0 ? 2 * s.inter : s.hidden, K = which == 0 ? s.hidden : s.inter;
    std::vector<uint16_t> d(size_t(M) * N);
    std::vector<uint8_t> a(size_t(M) * K), w(size_t(N) * K);
    CUDA_CHECK(cudaMemcpy(d.data(), which == 0 ? ceiling.output1() : ceiling.output2(), d.size() * 2,
                          cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(a.data(), which == 0 ? ceiling.activations1() : ceiling.activations2(), a.size(),
                          cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(w.data(), which == 0 ? ceiling.weights1() : ceiling.weights2(), w.size(),
                          cudaMemcpyDeviceToHost));
    long long bad = 0;
    for (uint16_t b : d) bad += (b & 0x7F80) == 0x7F80;  // inf or NaN
    EXPECT_EQ(bad, 0) << "GEMM " << which + 1;
    int wrong = 0;
    for (int t = 0; t < 97; ++t) {  // rows and columns spread over the output, corners included
      const int m = t == 0 ? 0 : t == 1 ? M - 1 : int((uint64_t(t) * 2654435761u) % uint64_t(M));
      const int n = t == 0 ? N - 1 : t == 1 ? 0 : int((uint64_t(t) * 40503u + 7) % uint64_t(N));
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p =
            double(moe::fp8_e4m3_decode(a[size_t(m) * K + k])) * moe::fp8_e4m3_decode(w[size_t(n) * K + k]);
        ref += p;
        mag += std::fabs(p);
      }
      ref *= scale;
      mag *= scale;
      uint32_t bits = uint32_t(d[size_t(m) * N + n]) << 16;
      float got;
      std::memcpy(&got, &bits, 4);
      // bf16 output: half an ulp (2^-9 relative) of the result, plus fp32 accumulation over K products
      const double tol = std::ldexp(std::fabs(ref), -8) + 1e-5 * mag;
      if (!(std::fabs(got - ref) <= tol) && wrong++ < 3)
        ADD_FAILURE() << "GEMM " << which + 1 << " [" << m << "][" << n << "] = " << got << ", reference " << ref
                      << " (tolerance " << tol << ")";
    }
    EXPECT_EQ(wrong, 0) << "GEMM " << which + 1;
  }
  // (its speed is bench_moe's `ceiling` backend, timed by the protocol: tests time nothing)
}

// (Shape validation needs no device: tests/moe_gpu/test_moe_shapes.cpp, label cpu.)

// Call-order and routing errors (need a device for the object).
TEST(UnfusedMoeGpu, RejectsBadUse) {
  NEED_SM90();
  const int T = 16, H = 256, I = 256, E = 8, K = 2;
  mb::UnfusedMoe moe({H, I, E, K, T}, mb::WeightFormat::kFp8);
  DevBuf x(size_t(T) * H), xs(size_t(T) * 2 * 4), wt(size_t(T) * K * 4), out(size_t(T) * H * 4);
  EXPECT_THROW(moe.run(static_cast<uint8_t*>(x.p), static_cast<float*>(xs.p), static_cast<float*>(wt.p),
                       static_cast<float*>(out.p), nullptr),
               UsageError);  // no weights, no routing
  std::vector<int32_t> index(size_t(T) * K);
  for (int t = 0; t < T; ++t) index[size_t(t) * K] = 0, index[size_t(t) * K + 1] = 1;
  index[5 * K + 1] = E;  // token 5, slot 1 out of range
  try {
    moe.set_routing(index.data());
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("token 5, slot 1"), std::string::npos) << e.what();
  }
  index[5 * K + 1] = 0;  // repeats slot 0
  EXPECT_THROW(moe.set_routing(index.data()), UsageError);
  index[5 * K + 1] = 1;
  moe.set_routing(index.data());
  EXPECT_EQ(moe.expert_rows()[0], T);
  EXPECT_EQ(moe.expert_rows()[1], T);
  EXPECT_EQ(moe.padded_rows(), 2 * T);
  EXPECT_THROW(moe.set_weights(nullptr, nullptr, nullptr, nullptr), UsageError);
}

// The memory floor's stream (mb::ByteStream): random bytes in ranges of odd lengths and offsets, two of them
// adjacent (merged), plus one range shorter than a vector; for every load form and the constructor's pick, the
// device checksum after two runs equals twice the host byte sum (every byte read once per run), the write range
// holds fp32 ones (poisoned before) and nothing beyond it is touched.
TEST(UnfusedMoeGpu, ByteStreamReadsEveryByteOnce) {
  NEED_SM90();
  const size_t n = (size_t(3) << 20) + 77;
  std::vector<uint8_t> h(n);
  uint64_t st64 = test_seed() | 1;
  for (auto& b : h) {
    st64 ^= st64 << 13, st64 ^= st64 >> 7, st64 ^= st64 << 17;
    b = uint8_t(st64 >> 24);
  }
  DevBuf d(n);
  CUDA_CHECK(cudaMemcpy(d.p, h.data(), n, cudaMemcpyHostToDevice));
  const auto* p = static_cast<const uint8_t*>(d.p);
  // [3, 1000003) and [1000003, 1500010) adjacent; [1600001, 1600009) short; [1700000, n) to the end
  const std::vector<mb::DeviceRange> reads{{p + 3, 1000000}, {p + 1000003, 500007}, {p + 1600001, 8},
                                           {p + 1700000, n - 1700000}, {nullptr, 0}};
  uint64_t want = 0;
  for (const auto& r : reads)
    for (size_t i = 0; i < r.bytes; ++i) want += h[size_t(static_cast<const uint8_t*>(r.p) - p) + i];
  const size_t wn = (size_t(1) << 20) + 64;  // fp32 words
  DevBuf w((wn + 16) * 4);
  Stream st;
  for (int v = -1; v < mb::ByteStream::variants(); ++v) {  // -1: the constructor's pick
    SCOPED_TRACE("variant " + std::to_string(v));
    CUDA_CHECK(cudaMemset(w.p, 0xFF, (wn + 16) * 4));
    mb::ByteStream bs(reads, w.p, wn * 4, v);
    if (v >= 0) {
      EXPECT_EQ(bs.variant(), v);
      for (int f = 0; f < mb::ByteStream::variants(); ++f) EXPECT_TRUE(std::isnan(bs.form_ms(f))) << f;
    } else {  // picked: every form was timed, and the pick is the fastest of them
      for (int f = 0; f < mb::ByteStream::variants(); ++f) {
        EXPECT_GT(bs.form_ms(f), 0.0) << f;
        EXPECT_LE(bs.form_ms(bs.variant()), bs.form_ms(f)) << f;
      }
    }
    EXPECT_THROW(bs.form_ms(mb::ByteStream::variants()), UsageError);
    EXPECT_EQ(bs.ranges(), 3);
    EXPECT_EQ(bs.bytes_read(), size_t(1000000 + 500007 + 8) + (n - 1700000));
    EXPECT_EQ(bs.bytes_written(), wn * 4);
    EXPECT_TRUE(bs.variant() >= 0 && std::string(bs.variant_name()) != "?") << bs.variant();
    bs.run(st.s);
    bs.run(st.s);
    EXPECT_EQ(bs.checksum(st.s), 2 * want);
    std::vector<uint32_t> got(wn + 16);
    CUDA_CHECK(cudaMemcpy(got.data(), w.p, got.size() * 4, cudaMemcpyDeviceToHost));
    size_t ones = 0;
    for (size_t i = 0; i < wn; ++i) ones += got[i] == 0x3f800000u;
    EXPECT_EQ(ones, wn);
    for (size_t i = wn; i < wn + 16; ++i) EXPECT_EQ(got[i], 0xFFFFFFFFu) << "word " << i << " past the write range";
    bs.reset_checksum(st.s);
    bs.run(st.s);
    EXPECT_EQ(bs.checksum(st.s), want);
  }
  // refusals, before any device work
  EXPECT_THROW(mb::ByteStream(reads, w.p, 16, mb::ByteStream::variants()), UsageError);
  EXPECT_THROW(mb::ByteStream({{nullptr, 16}}, w.p, 16), UsageError);
  EXPECT_THROW(mb::ByteStream({{p, 16}}, static_cast<uint8_t*>(w.p) + 4, 16), UsageError);
  EXPECT_THROW(mb::ByteStream({{p, 16}}, w.p, 20), UsageError);
  EXPECT_THROW(mb::ByteStream({}, nullptr, 0), UsageError);
}

// Every load form over 4 GiB (sizes past 32 bits) reads every byte: the checksum after six runs. Its rate is
// bench_moe's `stream` backend, timed by the protocol: tests time nothing.
TEST(UnfusedMoeGpu, ByteStreamReadsFourGiB) {
  NEED_SM90();
  const size_t n = size_t(4) << 30, wb = size_t(64) << 20;
  DevBuf d(n), w(wb);
  CUDA_CHECK(cudaMemset(d.p, 1, n));
  Stream st;
  for (int v = -1; v < mb::ByteStream::variants(); ++v) {
    SCOPED_TRACE("variant " + std::to_string(v));
    mb::ByteStream bs({{d.p, n}}, w.p, wb, v);
    for (int i = 0; i < 6; ++i) bs.run(st.s);
    EXPECT_EQ(bs.checksum(st.s), 6 * uint64_t(n));  // every byte 1, six runs since construction
  }
}
