// PLACEHOLDER until the attn-harness engineer lands validation and dispatch.
#include "xstage/attention.h"
extern "C" int xstage_attn_fwd(const xstage_attn_fwd_params*, void*) { return XSTAGE_ERR_UNSUPPORTED; }
extern "C" int xstage_attn_fwd_check(const xstage_attn_fwd_params*) { return XSTAGE_ERR_UNSUPPORTED; }
extern "C" const char* xstage_last_error(void) { return "not implemented yet"; }
