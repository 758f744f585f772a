// C ABI of the Ulysses layer (xstage/ulysses.h).
#include <memory>
#include <string>

#include "../attention/api_internal.hpp"
#include "../attention/team_internal.hpp"
#include "ulysses_layer.hpp"
#include "xstage/ulysses.h"

using xstage::attention::capi::guarded;
using xstage::attention::capi::set_error;

struct xstage_ulysses_s {
  xstage_team team;
  std::unique_ptr<xstage::ulysses::Layer> layer;
};

extern "C" int xstage_ulysses_create(xstage_team team, int batch, int seq_per_rank, int heads, int head_dim,
                                     int dtype, float softmax_scale, xstage_ulysses* out) {
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "out is null");
  return guarded([&] {
    *out = nullptr;
    if (head_dim != 64 && head_dim != 128)  // as xstage_attn_fwd: a head dim the kernel lacks is unsupported, not invalid
      return set_error(XSTAGE_ERR_UNSUPPORTED, "head_dim = " + std::to_string(head_dim) + " is not supported (64 or 128)");
    const xstage::ulysses::Shape s{batch, seq_per_rank, heads, head_dim, dtype, softmax_scale};
    if (const std::string why = xstage::ulysses::check_shape(s, team->team->world()); !why.empty())
      return set_error(XSTAGE_ERR_INVALID, why);
    if (int rc = xstage::attention::capi::check_device(); rc != XSTAGE_OK) return rc;
    auto l = std::make_unique<xstage_ulysses_s>();
    l->team = team;
    l->layer = std::make_unique<xstage::ulysses::Layer>(*team->team, s);
    *out = l.release();
    return int(XSTAGE_OK);
  });
}

extern "C" void xstage_ulysses_destroy(xstage_ulysses layer) { delete layer; }

extern "C" int xstage_ulysses_forward(xstage_ulysses layer, const void* const* q, const void* const* k,
                                      const void* const* v, int variant, void* stream, void** out_ptrs) {
  if (layer == nullptr) return set_error(XSTAGE_ERR_INVALID, "layer is null");
  if (int rc = xstage::attention::capi::check_arrays({{q, "q"}, {k, "k"}, {v, "v"}}); rc != XSTAGE_OK) return rc;
  if (variant != XSTAGE_ULYSSES_FUSED && variant != XSTAGE_ULYSSES_SERIAL)
    return set_error(XSTAGE_ERR_INVALID, "variant = " + std::to_string(variant) + " is neither fused (0) nor serial (1)");
  return guarded([&] {
    auto& t = *layer->team->team;
    const auto s = static_cast<cudaStream_t>(stream);  // NULL: the default stream, as in CUDA
    layer->layer->forward(q, k, v,
                          variant == XSTAGE_ULYSSES_FUSED ? xstage::ulysses::Variant::kFused
                                                          : xstage::ulysses::Variant::kSerial,
                          s);
    if (out_ptrs)
      for (int g = 0; g < t.local_ranks(); ++g) out_ptrs[g] = layer->layer->output(t.first_rank() + g);
    return int(XSTAGE_OK);
  });
}
