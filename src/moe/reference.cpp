// Host reference of the MoE layer (include/xstage/moe/reference.hpp).
#include "xstage/moe/reference.hpp"

#include <cmath>
#include <limits>
#include <random>

#include "xstage/common/error.hpp"

namespace xstage::moe {
namespace {

float uniform_pm1(std::mt19937_64& g) { return float(double(g() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

bool quantized(Precision p) { return p == Precision::W8A8 || p == Precision::W4A8; }

}  // namespace

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::Fp32;
  if (s == "bf16") return Precision::Bf16;
  if (s == "w8a8") return Precision::W8A8;
  if (s == "w4a8") return Precision::W4A8;
  throw UsageError("precision must be fp32, bf16, w8a8 or w4a8, got '" + s + "'");
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::W8A8: return "w8a8";
    case Precision::W4A8: return "w4a8";
  }
  return "?";
}

MoeWeights random_moe_weights(int hidden, int inter, int experts, std::uint64_t seed) {
  XSTAGE_REQUIRE(hidden >= 1 && inter >= 1 && experts >= 1, "MoE weights: bad shape hidden ", hidden, ", inter ", inter,
                 ", experts ", experts);
  MoeWeights w;
  w.hidden = hidden;
  w.inter = inter;
  w.experts = experts;
  std::mt19937_64 g(seed);
  w.w1.resize(std::size_t(experts) * 2 * inter * hidden);
  w.w2.resize(std::size_t(experts) * hidden * inter);
  const float s1 = 1.0f / std::sqrt(float(hidden)), s2 = 1.0f / std::sqrt(float(inter));
  for (float& v : w.w1) v = uniform_pm1(g) * s1;
  for (float& v : w.w2) v = uniform_pm1(g) * s2;
  return w;
}

std::vector<float> random_activations(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> x(n);
  for (float& v : x) v = uniform_pm1(g);
  return x;
}

MoeReference::MoeReference(const MoeWeights& w, Precision p, ReferenceOptions o)
    : hidden_(w.hidden), inter_(w.inter), experts_(w.experts), prec_(p), opt_(o) {
  XSTAGE_REQUIRE(hidden_ >= 1 && inter_ >= 1 && experts_ >= 1, "MoE reference: bad shape hidden ", hidden_, ", inter ",
                 inter_, ", experts ", experts_);
  XSTAGE_REQUIRE(w.w1.size() == std::size_t(experts_) * 2 * inter_ * hidden_ &&
                     w.w2.size() == std::size_t(experts_) * hidden_ * inter_,
                 "MoE reference: weight arrays do not match hidden ", hidden_, ", inter ", inter_, ", experts ", experts_);
  if (quantized(p))
    XSTAGE_REQUIRE(hidden_ % kQuantBlock == 0 && inter_ % kQuantBlock == 0, "MoE reference (", to_string(p),
                   "): hidden (", hidden_, ") and intermediate (", inter_, ") sizes must be multiples of ", kQuantBlock);
  for (int e = 0; e < experts_; ++e) {
    w1_.push_back(prepare(w.w1_of(e), 2 * inter_, hidden_));
    w2_.push_back(prepare(w.w2_of(e), hidden_, inter_));
  }
}

MoeReference::Operand MoeReference::prepare(const float* w, int rows, int cols) const {
  Operand op;
  op.rows = rows;
  op.cols = cols;
  op.v.resize(std::size_t(rows) * cols);
  if (!quantized(prec_)) {
    for (std::size_t i = 0; i < op.v.size(); ++i) op.v[i] = prec_ == Precision::Bf16 ? bf16_round(w[i]) : w[i];
    return op;
  }
  const Fp8Tensor q = prec_ == Precision::W8A8 ? quantize_weight_128x128(w, rows, cols)
                                               : int4_to_fp8(quantize_int4(w, rows, cols, kQuantBlock));
  op.block_rows = q.block_rows;
  op.block_cols = q.block_cols;
  for (std::size_t i = 0; i < op.v.size(); ++i) op.v[i] = fp8_e4m3_decode(q.code[i]);
  op.scale = q.scale;
  return op;
}

void MoeReference::prepare_act(const float* x, int n, std::vector<float>& a, std::vector<float>& scale) const {
  a.resize(n);
  scale.clear();
  if (!quantized(prec_)) {
    for (int i = 0; i < n; ++i) a[i] = prec_ == Precision::Bf16 ? bf16_round(x[i]) : x[i];
    return;
  }
  const Fp8Tensor q = quantize_act_1x128(x, 1, n);
  for (int i = 0; i < n; ++i) a[i] = fp8_e4m3_decode(q.code[i]);
  scale = q.scale;
}

void MoeReference::gemv(const Operand& w, const float* a, const float* a_scale, float* out) const {
  const int K = w.cols;
  for (int n = 0; n < w.rows; ++n) {
    const float* row = w.v.data() + std::size_t(n) * K;
    if (prec_ == Precision::Fp32) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += double(a[k]) * double(row[k]);
      out[n] = float(acc);
    } else if (prec_ == Precision::Bf16) {
      float acc = 0;
      for (int k = 0; k < K; ++k) acc += a[k] * row[k];
      out[n] = acc;
    } else {
      const float* ws = w.scale.data() + std::size_t(n / w.block_rows) * (K / w.block_cols);
      float acc = 0;
      for (int kb = 0; kb < K / kQuantBlock; ++kb) {
        float part = 0;
        for (int k = kb * kQuantBlock; k < (kb + 1) * kQuantBlock; ++k) part += a[k] * row[k];
        acc += part * (a_scale[kb] * ws[kb * kQuantBlock / w.block_cols]);
      }
      out[n] = acc;
    }
  }
}

void MoeReference::intermediate_row(int e, const float* x, float* h) const {
  XSTAGE_REQUIRE(e >= 0 && e < experts_, "MoE reference: expert ", e, " is out of range [0, ", experts_, ")");
  std::vector<float> a, sa, gu(2 * std::size_t(inter_));
  prepare_act(x, hidden_, a, sa);
  gemv(w1_[e], a.data(), sa.data(), gu.data());
  std::vector<float> hf(inter_);
  for (int i = 0; i < inter_; ++i) {
    const float g = gu[i], u = gu[inter_ + i];
    hf[i] = g / (1.0f + std::exp(-g)) * u;
  }
  if (quantized(prec_)) {
    std::vector<float> s;
    prepare_act(hf.data(), inter_, a, s);  // FP8 round trip of h, 1x128 blocks
    for (int i = 0; i < inter_; ++i) h[i] = a[i] * s[i / kQuantBlock];
  } else {
    for (int i = 0; i < inter_; ++i) h[i] = prec_ == Precision::Bf16 ? bf16_round(hf[i]) : hf[i];
  }
}

void MoeReference::expert_row(int e, const float* x, float* y) const {
  XSTAGE_REQUIRE(e >= 0 && e < experts_, "MoE reference: expert ", e, " is out of range [0, ", experts_, ")");
  std::vector<float> a, sa, gu(2 * std::size_t(inter_)), hf(inter_);
  prepare_act(x, hidden_, a, sa);
  gemv(w1_[e], a.data(), sa.data(), gu.data());
  for (int i = 0; i < inter_; ++i) {
    const float g = gu[i], u = gu[inter_ + i];
    hf[i] = g / (1.0f + std::exp(-g)) * u;
  }
  prepare_act(hf.data(), inter_, a, sa);  // Linear-2 input: rounded / FP8 codes with 1x128 scales
  gemv(w2_[e], a.data(), sa.data(), y);
}

std::vector<float> MoeReference::forward(const float* x, int tokens, const std::int32_t* index, const float* weight,
                                         int topk) const {
  XSTAGE_REQUIRE(tokens >= 0, "MoE reference: token count must be >= 0, got ", tokens);
  validate_topk(index, tokens, topk, experts_);
  std::vector<float> out(std::size_t(tokens) * hidden_, 0.0f), y(hidden_);
  for (int t = 0; t < tokens; ++t) {
    float* o = out.data() + std::size_t(t) * hidden_;
    for (int j = 0; j < topk; ++j) {
      expert_row(index[std::size_t(t) * topk + j], x + std::size_t(t) * hidden_, y.data());
      const float w = weight[std::size_t(t) * topk + j];
      for (int i = 0; i < hidden_; ++i) o[i] += w * (opt_.combine_bf16 ? bf16_round(y[i]) : y[i]);
    }
  }
  return out;
}

std::vector<float> moe_forward_ep(const MoeReference& ref, const DispatchPlan& plan, const Routing& routing,
                                  const std::vector<float>& x) {
  const int P = plan.world(), T = plan.tokens_per_rank(), k = plan.topk(), H = ref.hidden();
  XSTAGE_REQUIRE(routing.world == P && routing.tokens_per_rank == T && routing.topk == k,
                 "EP reference: the routing (", routing.world, " ranks x ", routing.tokens_per_rank, " tokens x top-",
                 routing.topk, ") does not match the dispatch plan (", P, " x ", T, " x top-", k, ")");
  XSTAGE_REQUIRE(plan.placement().experts == ref.experts(), "EP reference: the plan places ", plan.placement().experts,
                 " experts, the weights have ", ref.experts());
  XSTAGE_REQUIRE(x.size() == std::size_t(P) * T * H, "EP reference: expected ", std::size_t(P) * T * H,
                 " activations, got ", x.size());
  // Combine buffers [P][T][k][H], poisoned.
  std::vector<float> combine(std::size_t(P) * T * k * H, std::numeric_limits<float>::quiet_NaN());
  std::vector<char> written(std::size_t(P) * T * k, 0);
  std::vector<float> y(H);
  for (int d = 0; d < P; ++d) {
    const std::vector<CombineSrc>& map = plan.combine_map(d);
    for (int row = 0; row < plan.recv_rows(d); ++row) {
      const CombineSrc c = map[row];
      if (c.src_rank < 0) continue;  // padding row of a partial tile: computed by a kernel, stored nowhere
      int le, r, s, pos;
      XSTAGE_CHECK(plan.view().locate(d, row, &le, &r, &s, &pos) && s == c.src_rank,
                   "EP reference: combine map and locate() disagree at rank ", d, " row ", row);
      const int e = plan.placement().global_of(d, le);
      XSTAGE_CHECK(routing.expert(c.src_rank, c.token, c.slot) == e, "EP reference: rank ", d, " row ", row,
                   " holds expert ", e, " but routing sends (", c.src_rank, ", ", c.token, ", ", c.slot, ") to expert ",
                   routing.expert(c.src_rank, c.token, c.slot));
      ref.expert_row(e, x.data() + (std::size_t(c.src_rank) * T + c.token) * H, y.data());
      const std::size_t entry = (std::size_t(c.src_rank) * T + c.token) * k + c.slot;
      XSTAGE_CHECK(!written[entry], "EP reference: combine entry (", c.src_rank, ", ", c.token, ", ", c.slot,
                   ") written twice");
      written[entry] = 1;
      for (int i = 0; i < H; ++i) combine[entry * H + i] = ref.options().combine_bf16 ? bf16_round(y[i]) : y[i];
    }
  }
  std::vector<float> out(std::size_t(P) * T * H, 0.0f);
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const std::size_t entry = (std::size_t(s) * T + t) * k + j;
        XSTAGE_CHECK(written[entry], "EP reference: combine entry (", s, ", ", t, ", ", j, ") was never written");
        const float w = routing.w(s, t, j);
        float* o = out.data() + (std::size_t(s) * T + t) * H;
        for (int i = 0; i < H; ++i) o[i] += w * combine[entry * H + i];
      }
  return out;
}

}  // namespace xstage::moe
