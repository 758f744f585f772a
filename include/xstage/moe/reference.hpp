#pragma once
// Host reference of the expert-parallel MoE layer (issue 11), applying the kernel's quantization in
// fp32, for the GPU tests to compare against and for the CPU tests of the dispatch/combine plumbing.
//
// One routed row (token x, expert e), per precision:
//   Fp32 : no rounding; dot products accumulated in double (the "high precision" reference).
//   Bf16 : x, W1, W2 rounded to bf16; fp32 accumulation; h = silu(g) * u rounded to bf16.
//   W8A8 : x -> FP8 with 1x128 block scales; W1, W2 -> FP8 with 128x128 block scales; each GEMM
//          sums 128-deep blocks of decoded codes in fp32 and promotes per block:
//          acc += partial(kb) * (a_scale[kb] * w_scale[n][kb]); h = silu(g) * u in fp32 -> FP8 1x128.
//   W4A8 : as W8A8, the weights int4 with per-(row, 128-group) scales converted exactly to FP8
//          (quant.hpp: int4_to_fp8), so the weight block scale is 1x128.
// with g = x W1[gate]^T (rows [0, inter) of W1), u = x W1[up]^T (rows [inter, 2 inter)),
// silu(g) = g / (1 + exp(-g)), y = h W2^T. Combine: out[t] = sum_j weight[t][j] * c(y(t, j)), summed in
// fp32 in slot order, where c rounds to bf16 (the combine buffer's dtype) unless combine_bf16 = false.
#include <cstdint>
#include <string>
#include <vector>

#include "xstage/moe/dispatch_plan.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::moe {

enum class Precision { Fp32, Bf16, W8A8, W4A8 };
Precision parse_precision(const std::string& s);  // "fp32" | "bf16" | "w8a8" | "w4a8"
const char* to_string(Precision p);

struct MoeWeights {
  int hidden = 0, inter = 0, experts = 0;
  std::vector<float> w1;  // [E][2 * inter][hidden]: rows [0, inter) gate, [inter, 2 * inter) up
  std::vector<float> w2;  // [E][hidden][inter]
  const float* w1_of(int e) const { return w1.data() + std::size_t(e) * 2 * inter * hidden; }
  const float* w2_of(int e) const { return w2.data() + std::size_t(e) * hidden * inter; }
};

// Uniform(-1, 1) / sqrt(fan-in) weights and Uniform(-1, 1) activations from mt19937_64(seed).
MoeWeights random_moe_weights(int hidden, int inter, int experts, std::uint64_t seed);
std::vector<float> random_activations(std::size_t n, std::uint64_t seed);

struct ReferenceOptions {
  bool combine_bf16 = true;  // round each expert output to bf16 before the weighted sum
};

class MoeReference {
 public:
  // UsageError for shapes the precision cannot take (quantized: hidden and inter multiples of 128).
  MoeReference(const MoeWeights& w, Precision p, ReferenceOptions o = {});

  int hidden() const { return hidden_; }
  int inter() const { return inter_; }
  int experts() const { return experts_; }
  Precision precision() const { return prec_; }
  const ReferenceOptions& options() const { return opt_; }

  // y[hidden] = expert e applied to one token x[hidden] (before the combine rounding).
  void expert_row(int e, const float* x, float* y) const;
  // The intermediate h[inter] = silu(g) * u of that row, as Linear-2 consumes it (after its rounding /
  // FP8 round trip), for tests of the Linear-1 epilogue.
  void intermediate_row(int e, const float* x, float* h) const;
  // out[tokens][hidden]: every token through its top-k experts, weighted sum (index, weight: [tokens][k]).
  std::vector<float> forward(const float* x, int tokens, const std::int32_t* index, const float* weight, int topk) const;

 private:
  // One prepared GEMM operand [rows][cols]: values after rounding (bf16) or decoded FP8 codes, and
  // block scales (empty for Fp32 / Bf16).
  struct Operand {
    int rows = 0, cols = 0, block_rows = 1, block_cols = 1;
    std::vector<float> v, scale;
  };
  Operand prepare(const float* w, int rows, int cols) const;
  // out[n] = sum_k a[k] * W[n][k] with the precision's accumulation; a_scale: per 128 block of a (quantized).
  void gemv(const Operand& w, const float* a, const float* a_scale, float* out) const;
  // x -> the GEMM input (rounded / decoded codes) and its scales.
  void prepare_act(const float* x, int n, std::vector<float>& a, std::vector<float>& scale) const;

  int hidden_, inter_, experts_;
  Precision prec_;
  ReferenceOptions opt_;
  std::vector<Operand> w1_, w2_;
};

// The expert-parallel layer emulated on the host through a dispatch plan: every rank d computes its
// received rows in receive-buffer order (tokens fetched from their source rank through combine_map),
// writes each result into its source rank's combine buffer entry (token, slot) -- poisoned with NaN
// beforehand -- and every source rank then sums its slots. x and the result are [P][T][hidden]
// (routing.index / weight give the top-k). RuntimeError if a combine entry is written twice or never.
std::vector<float> moe_forward_ep(const MoeReference& ref, const DispatchPlan& plan, const Routing& routing,
                                  const std::vector<float>& x);

}  // namespace xstage::moe
