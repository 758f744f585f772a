/* xstage attention: C ABI of the sm_90a FlashAttention forward kernel (raw device pointers, shapes,
 * strides, stream). Loaded by the Python module through ctypes; no torch at build time.
 * Layout: (batch, seq, heads, dim) with element strides; the dim stride must be 1. */
#ifndef XSTAGE_ATTENTION_H
#define XSTAGE_ATTENTION_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { XSTAGE_DTYPE_BF16 = 0, XSTAGE_DTYPE_FP16 = 1 } xstage_dtype;

typedef enum {
  XSTAGE_OK = 0,
  XSTAGE_ERR_CUDA = 1,         /* a CUDA call or the launch failed */
  XSTAGE_ERR_INVALID = 2,      /* bad argument: shape, stride, null or misaligned pointer */
  XSTAGE_ERR_UNSUPPORTED = 3,  /* valid but not supported (head dim, device) */
} xstage_status;

typedef struct {
  const void* q; /* [batch, seqlen_q,  heads, head_dim] */
  const void* k; /* [batch, seqlen_kv, heads, head_dim] */
  const void* v; /* [batch, seqlen_kv, heads, head_dim] */
  void* o;       /* [batch, seqlen_q,  heads, head_dim], same dtype as q */
  float* lse;    /* optional (NULL): [batch, heads, seqlen_q] fp32, natural-log log-sum-exp */
  int batch, seqlen_q, seqlen_kv, heads, head_dim;
  /* element strides for (batch, seq, head); dim stride is 1 */
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
  float softmax_scale; /* <= 0 means 1/sqrt(head_dim) */
  int causal;          /* 0: full attention (DiT); 1: causal (bottom-right aligned) */
  /* an xstage_dtype; an int so that any value a caller passes is defined to read (and refused by name) */
  int dtype;
} xstage_attn_fwd_params;

/* Validates, then launches on `stream` (a cudaStream_t; NULL = default stream). Returns XSTAGE_OK or
 * an error code; xstage_last_error() then names the bad value. Nothing is written on error. */
int xstage_attn_fwd(const xstage_attn_fwd_params* params, void* stream);
/* Validation alone (no device needed): XSTAGE_OK or the code xstage_attn_fwd would return. */
int xstage_attn_fwd_check(const xstage_attn_fwd_params* params);
/* The calling thread's last error message ("" after a success; thread-local): valid until this thread's next call into
 * the library. */
const char* xstage_last_error(void);
/* The library's build: "xstage 0.1.0 (git <12 hex digits>[+dirty])" (git "unknown" outside a checkout). */
const char* xstage_version(void);

#ifdef __cplusplus
}
#endif
#endif
