#pragma once
// The MoE layer shapes of issue 11 (hidden / expert intermediate / routed experts / top-k), with where
// each number comes from, and the FLOP count of one layer. docs/MOE.md keeps the same table with its
// sources; tests/moe/test_shapes.cpp checks that the two agree with the numbers below.
//
// Only the routed experts are modelled (a shared expert, where a model has one, is a dense MLP outside
// the expert-parallel kernel).
#include <array>
#include <cstdint>
#include <string_view>

namespace xstage::moe {

struct MoeShape {
  std::string_view name;    // the key used on command lines and in result files
  int hidden;               // config.json hidden_size
  int inter;                // expert intermediate size (moe_intermediate_size; DiT-MoE: mlp_ratio * hidden)
  int experts;              // routed experts (n_routed_experts / num_experts)
  int topk;                 // experts per token (num_experts_per_tok)
  std::string_view source;  // where the four numbers were read
};

inline constexpr std::array<MoeShape, 7> kMoeShapes{{
    {"dit-moe-xl", 1152, 4608, 16, 2,
     "feizc/DiT-MoE models.py: DiT_XL_2 hidden_size=1152, MoeMLP intermediate = mlp_ratio(4) * hidden, "
     "SparseMoeBlock num_experts=16, num_experts_per_tok=2"},
    {"qwen3-30b-a3b", 2048, 768, 128, 8,
     "Qwen/Qwen3-30B-A3B config.json: hidden_size, moe_intermediate_size, num_experts, num_experts_per_tok"},
    {"qwen3-235b-a22b", 4096, 1536, 128, 8,
     "Qwen/Qwen3-235B-A22B config.json: hidden_size, moe_intermediate_size, num_experts, num_experts_per_tok"},
    {"deepseek-v3", 7168, 2048, 256, 8,
     "deepseek-ai/DeepSeek-V3 config.json: hidden_size, moe_intermediate_size, n_routed_experts, "
     "num_experts_per_tok"},
    {"deepseek-v4-flash", 4096, 2048, 256, 6,
     "DeepSeek-V4-Flash config.json (model_type deepseek_v4): hidden_size, moe_intermediate_size, "
     "n_routed_experts, num_experts_per_tok"},
    {"deepseek-v4-pro", 7168, 3072, 384, 6,
     "DeepSeek-V4-Pro config.json: hidden_size, moe_intermediate_size, n_routed_experts, num_experts_per_tok"},
    {"glm-flash", 4096, 2048, 288, 8,
     "GLM-Flash-class (issue 11); equals text_config of a glm5_next config.json: hidden_size, "
     "moe_intermediate_size, n_routed_experts, num_experts_per_tok"},
}};

// nullptr when no shape has that name.
inline constexpr const MoeShape* find_moe_shape(std::string_view name) {
  for (const MoeShape& s : kMoeShapes)
    if (s.name == name) return &s;
  return nullptr;
}

// FLOPs of one MoE layer over `tokens` tokens (one multiply-add = 2 FLOPs), the two expert GEMMs only:
//   Linear-1 (hidden -> 2*inter, gate and up): 2 * hidden * (2 * inter) per routed token,
//   Linear-2 (inter -> hidden):                2 * inter * hidden       per routed token,
// and tokens * topk routed tokens: tokens * topk * (2*h*2*inter + 2*inter*h) = 6 * tokens * topk * h * inter.
// SwiGLU, quantization and the top-k weighted sum are O(tokens * topk * (inter + hidden)) and not counted.
inline constexpr double moe_row_flops(const MoeShape& s) {  // one routed (token, expert) row: 6 * hidden * inter
  return 2.0 * s.hidden * (2.0 * s.inter) + 2.0 * s.inter * s.hidden;
}
inline constexpr double moe_layer_flops(const MoeShape& s, long long tokens) {
  return double(tokens) * s.topk * moe_row_flops(s);
}

}  // namespace xstage::moe
