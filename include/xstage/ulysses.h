/* xstage Ulysses attention layer through the C ABI of libxstage_attention.so: per rank q, k, v
 * (batch, seq_per_rank, heads, head_dim) sequence-partitioned in; attention over the full sequence
 * (world * seq_per_rank tokens) with the post-attention all-to-all fused into the attention epilogue; output
 * (batch, seq_per_rank, heads, head_dim). heads must be divisible by the team's world size. Non-causal.
 * Errors: a non-zero xstage_status and xstage_last_error() naming the bad value. */
#ifndef XSTAGE_ULYSSES_H
#define XSTAGE_ULYSSES_H
#include "xstage/team.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xstage_ulysses_s* xstage_ulysses;

enum { XSTAGE_ULYSSES_FUSED = 0, XSTAGE_ULYSSES_SERIAL = 1 };

/* Allocates the layer's symmetric buffers on the team (collective for real teams). dtype: an xstage_dtype. head_dim 64 or
 * 128 (another: XSTAGE_ERR_UNSUPPORTED, as xstage_attn_fwd); softmax_scale finite, <= 0 meaning 1/sqrt(head_dim). */
int xstage_ulysses_create(xstage_team team, int batch, int seq_per_rank, int heads, int head_dim, int dtype,
                          float softmax_scale, xstage_ulysses* out);
void xstage_ulysses_destroy(xstage_ulysses layer);
/* One layer call for every rank this process serves, on `stream` (a cudaStream_t; NULL: the default stream, as
 * in CUDA): ordered after the work that wrote q, k, v on that stream and before what reads the outputs there.
 * q, k, v are arrays of local_ranks device pointers (contiguous tensors of local rank first_rank + g). out_ptrs
 * (local_ranks entries, or NULL) receives this call's outputs: the layer's own buffers, valid until the second
 * next call. variant: XSTAGE_ULYSSES_FUSED or XSTAGE_ULYSSES_SERIAL (attention, then the all-to-all). A refused call
 * (a NULL pointer, a bad variant) changes nothing: the outputs of earlier calls stay where they were. */
int xstage_ulysses_forward(xstage_ulysses layer, const void* const* q, const void* const* k, const void* const* v,
                           int variant, void* stream, void** out_ptrs);

#ifdef __cplusplus
}
#endif
#endif
