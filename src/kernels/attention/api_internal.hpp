#pragma once
// Shared by the C ABI's translation units (api.cpp, team_api.cpp): the thread's last-error message and
// the argument and device checks.
#include <cuda_runtime.h>

#include <string>

#include "xstage/attention.h"

namespace xstage::attention::capi {
int set_error(int code, const std::string& message);  // returns code
void clear_error();
int cuda_fail(const char* what, cudaError_t e);       // XSTAGE_ERR_CUDA with CUDA's message
int check_params(const xstage_attn_fwd_params* params, bool with_output = true);
int check_device();                                   // XSTAGE_ERR_UNSUPPORTED unless sm_90
}  // namespace xstage::attention::capi
