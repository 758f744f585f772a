// PLACEHOLDER until the attn-kernel engineer lands the kernel: reports "not supported".
#include "sm90_fwd.hpp"
namespace xstage::attention {
cudaError_t run_fwd_sm90(const xstage_attn_fwd_params&, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace xstage::attention
