// C ABI of the fused MoE layer (xstage/moe.h) over moe_kernel::MoeWorkspace and run_moe_layer. It lives in
// libxstage_attention.so beside the team handles it takes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "../attention/api_internal.hpp"
#include "../attention/team_internal.hpp"
#include "moe_layer.hpp"
#include "xstage/common/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/moe.h"

using xstage::attention::capi::guarded;
using xstage::attention::capi::set_error;
namespace mk = xstage::moe_kernel;

struct xstage_moe_s {
  xstage_team team;
  mk::MoeWeightFormat format;
  std::unique_ptr<mk::MoeWorkspace> ws;
};

extern "C" int xstage_moe_create(xstage_team team, int hidden, int inter, int experts, int topk, int tokens_per_rank,
                                 int format, xstage_moe* out) {
  if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "out is null");
  *out = nullptr;
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  return guarded([&] {
    XSTAGE_REQUIRE(format == XSTAGE_MOE_W8A8 || format == XSTAGE_MOE_W4A8 || format == XSTAGE_MOE_BF16,
                   "moe layer: format ", format, " is none of w8a8 (0), w4a8 (1), bf16 (2)");
    const mk::MoeShape s{hidden, inter, experts, topk, tokens_per_rank};
    if (const std::string why = mk::check_moe_shape(s, team->team->world()); !why.empty())
      return set_error(XSTAGE_ERR_INVALID, why);
    if (int rc = xstage::attention::capi::check_device(); rc != XSTAGE_OK) return rc;
    auto l = std::make_unique<xstage_moe_s>();
    l->team = team;
    l->format = mk::MoeWeightFormat(format);
    l->ws = std::make_unique<mk::MoeWorkspace>(*team->team, s, l->format);
    *out = l.release();
    return int(XSTAGE_OK);
  });
}

extern "C" void xstage_moe_destroy(xstage_moe layer) { delete layer; }

namespace {
// xstage_moe_forward and xstage_moe_forward_device: the routing on the host (topk_index_all) or per local rank on the
// device (topk_index), exactly one of them set.
int forward(xstage_moe layer, const int* tokens, const int32_t* topk_index_all, const int32_t* const* topk_index,
            const void* const* x,
            const float* const* x_scale, const float* const* topk_weight, float* const* out, const void* w1,
            const float* w1_scale, const void* w2, const float* w2_scale, int order, void* stream) {
  if (int rc = xstage::attention::capi::check_arrays({{x, "x"}, {topk_weight, "topk_weight"}, {out, "out"}},
                                                     " (only x_scale's may be: bf16)");
      rc != XSTAGE_OK)
    return rc;
  if (order != XSTAGE_MOE_EXPERT_WAVE && order != XSTAGE_MOE_INTERLEAVED && order != XSTAGE_MOE_EXPERT_WAVE_LAGGED &&
      order != XSTAGE_MOE_L1_FIRST)
    return set_error(XSTAGE_ERR_INVALID, "order = " + std::to_string(order) +
                                             " is none of expert-wave (0), interleaved (1), expert-wave with lagged "
                                             "waves (2), every Linear-1 tile first (3)");
  return guarded([&] {
    auto& t = *layer->team->team;
    mk::MoeLayerParams p;
    p.shape = layer->ws->shape();
    p.topk_index_all = topk_index_all;
    for (int g = 0; g < t.local_ranks(); ++g) {  // run_moe_layer names a null or misplaced one
      p.rank[g].topk_index = topk_index ? topk_index[g] : nullptr;
      p.rank[g].x = x[g];
      p.rank[g].x_scale = x_scale ? x_scale[g] : nullptr;
      p.rank[g].topk_weight = topk_weight[g];
      p.rank[g].out = out[g];
      p.rank[g].tokens = tokens ? tokens[g] : -1;
    }
    p.weights = layer->format;
    p.w1 = w1;
    p.w1_scale = w1_scale;
    p.w2 = w2;
    p.w2_scale = w2_scale;
    const bool l1_first = order == XSTAGE_MOE_L1_FIRST;
    p.order = order == XSTAGE_MOE_INTERLEAVED || l1_first ? mk::MoeOrder::kInterleaved : mk::MoeOrder::kExpertWave;
    p.wave_lag = order == XSTAGE_MOE_EXPERT_WAVE_LAGGED ? 1 : 0;
    p.lead = l1_first ? mk::kLeadAllRows : 0;
    mk::run_moe_layer(t, *layer->ws, p, static_cast<cudaStream_t>(stream));  // validates the rest (named values)
    return int(XSTAGE_OK);
  });
}
}  // namespace

extern "C" int xstage_moe_forward(xstage_moe layer, const int* tokens, const int32_t* topk_index_all,
                                  const void* const* x,
                                  const float* const* x_scale, const float* const* topk_weight, float* const* out,
                                  const void* w1, const float* w1_scale, const void* w2, const float* w2_scale,
                                  int order, void* stream) {
  if (layer == nullptr) return set_error(XSTAGE_ERR_INVALID, "layer is null");
  if (topk_index_all == nullptr) return set_error(XSTAGE_ERR_INVALID, "topk_index_all (host routing) is null");
  return forward(layer, tokens, topk_index_all, nullptr, x, x_scale, topk_weight, out, w1, w1_scale, w2, w2_scale, order,
                 stream);
}

extern "C" int xstage_moe_forward_device(xstage_moe layer, const int* tokens, const int32_t* const* topk_index,
                                         const void* const* x,
                                         const float* const* x_scale, const float* const* topk_weight,
                                         float* const* out, const void* w1, const float* w1_scale, const void* w2,
                                         const float* w2_scale, int order, void* stream) {
  if (layer == nullptr) return set_error(XSTAGE_ERR_INVALID, "layer is null");
  if (topk_index == nullptr) return set_error(XSTAGE_ERR_INVALID, "topk_index (the device routing array) is null");
  for (int g = 0; g < layer->team->team->local_ranks(); ++g)
    if (topk_index[g] == nullptr && !(tokens != nullptr && tokens[g] == 0))  // a rank without tokens reads none
      return set_error(XSTAGE_ERR_INVALID, "topk_index[" + std::to_string(g) + "] (local rank " +
                                               std::to_string(layer->team->team->first_rank() + g) + ") is null");
  return forward(layer, tokens, nullptr, topk_index, x, x_scale, topk_weight, out, w1, w1_scale, w2, w2_scale, order, stream);
}

extern "C" int xstage_moe_auto_order(xstage_moe layer, int tokens, int skewed, const char* platform, int* order,
                                     int* lead, char* reason, int reason_bytes) {
  if (layer == nullptr) return set_error(XSTAGE_ERR_INVALID, "layer is null");
  if (order == nullptr) return set_error(XSTAGE_ERR_INVALID, "order is null");
  const int capacity = layer->ws->shape().tokens_per_rank;
  if (tokens < 0 || tokens > capacity)
    return set_error(XSTAGE_ERR_INVALID, "tokens = " + std::to_string(tokens) + " must be in [0, " +
                                             std::to_string(capacity) + "] (0: the layer's capacity)");
  return guarded([&] {
    XSTAGE_REQUIRE(skewed == 0 || skewed == 1, "moe auto order: skewed must be 0 (balanced) or 1 (Zipf), got ", skewed);
    auto& t = *layer->team->team;
    const auto mx = xstage::model::Platform::load(platform ? platform : "h200-nvlink4");
    XSTAGE_REQUIRE(mx.tc_fp8 > 0 && mx.sm_count > 0, "moe auto order: platform ", mx.name,
                   " has no measured FP8 tensor-core rate (tensor_core_tflops.fp8) to time the tiles with");
    mk::MoeLayerParams prm;  // the layer's shape and format: the kernel's tile widths
    prm.shape = layer->ws->shape();
    if (tokens > 0) prm.shape.tokens_per_rank = tokens;  // the call's count: rows per expert, the simulated tiles
    prm.weights = layer->format;
    int l2 = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, t.device()); e != cudaSuccess)
      return xstage::attention::capi::cuda_fail("cudaDeviceGetAttribute (L2 size)", e);
    const mk::MoeOrderAdvice adv =
        mk::advise_moe_order(mx, prm, t.world(), t.sms_per_rank(), double(l2),
                             skewed ? xstage::moe::RoutingKind::Skewed : xstage::moe::RoutingKind::Balanced, 1,
                             mx.tc_fp8 / mx.sm_count);
    const xstage::moe::OrderChoice& ch = adv.choice;
    *order = ch.l1_first                                                ? XSTAGE_MOE_L1_FIRST
             : ch.order == xstage::moe::OrderChoice::Order::kInterleaved ? XSTAGE_MOE_INTERLEAVED
             : ch.wave_lag                                             ? XSTAGE_MOE_EXPERT_WAVE_LAGGED
                                                                       : XSTAGE_MOE_EXPERT_WAVE;
    if (lead) *lead = ch.lead;
    if (reason && reason_bytes > 0) {
      const size_t n = std::min(ch.reason.size(), size_t(reason_bytes - 1));
      std::memcpy(reason, ch.reason.data(), n);
      reason[n] = '\0';
    }
    return int(XSTAGE_OK);
  });
}

extern "C" int xstage_moe_check(xstage_moe layer, void* stream, const char* what) {
  if (layer == nullptr) return set_error(XSTAGE_ERR_INVALID, "layer is null");
  return guarded([&] {
    layer->ws->check(*layer->team->team, what ? what : "moe layer", static_cast<cudaStream_t>(stream));
    return int(XSTAGE_OK);
  });
}

extern "C" int xstage_moe_pack_int4(const void* twos, void* out, int matrices, int rows, int K, void* stream) {
  if (twos == nullptr || out == nullptr) return set_error(XSTAGE_ERR_INVALID, "twos / out is null");
  return guarded([&] {
    XSTAGE_REQUIRE(matrices >= 1 && rows >= 1 && K >= 1, "pack_int4: matrices, rows and K must be >= 1, got ",
                   matrices, ", ", rows, ", ", K);
    mk::pack_int4_weights(twos, out, matrices, rows, K, static_cast<cudaStream_t>(stream));
    return int(XSTAGE_OK);
  });
}
