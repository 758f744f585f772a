#pragma once
// Shared by the C ABI's translation units (api.cpp, team_api.cpp): the thread's last-error message and
// the argument and device checks.
#include <cuda_runtime.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

#include "xstage/common/error.hpp"

#include "xstage/attention.h"

namespace xstage::attention::capi {
int set_error(int code, const std::string& message);  // returns code
void clear_error();
int cuda_fail(const char* what, cudaError_t e);       // XSTAGE_ERR_CUDA with CUDA's message
int check_params(const xstage_attn_fwd_params* params, bool with_output = true);
int check_device();                                   // XSTAGE_ERR_UNSUPPORTED unless sm_90
// XSTAGE_ERR_INVALID "the NAME array is null" + note for the first null {pointer, NAME}, else XSTAGE_OK.
inline int check_arrays(std::initializer_list<std::pair<const void*, const char*>> arrays, const char* note = "") {
  for (const auto& [arr, name] : arrays)
    if (arr == nullptr) return set_error(XSTAGE_ERR_INVALID, std::string("the ") + name + " array is null" + note);
  return XSTAGE_OK;
}

// Runs f, mapping exceptions to status codes with the message kept for xstage_last_error().
template <class F>
int guarded(F&& f) {
  try {
    const int rc = f();
    if (rc == XSTAGE_OK) clear_error();
    return rc;
  } catch (const UsageError& e) {
    return set_error(XSTAGE_ERR_INVALID, e.what());
  } catch (const std::exception& e) {
    return set_error(XSTAGE_ERR_CUDA, e.what());
  }
}
}  // namespace xstage::attention::capi
