#pragma once
// Host entry of the sm_90a forward kernel. Called by api.cpp with parameters already validated
// (xstage_attn_fwd_check passed); picks the compile-time variant (dtype, head dim, causal) and launches.
#include <cuda_runtime.h>

#include "xstage/attention.h"

namespace xstage::attention {
cudaError_t run_fwd_sm90(const xstage_attn_fwd_params& p, cudaStream_t stream);
}  // namespace xstage::attention
