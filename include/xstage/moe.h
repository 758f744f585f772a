/* xstage fused expert-parallel MoE layer through the C ABI of libxstage_attention.so (the library of every xstage
 * C ABI; its name is the first kernel's). One persistent sm_90a kernel per call does dispatch -> Linear-1 ->
 * SwiGLU -> Linear-2 -> combine stores into the tokens' source ranks, then the top-k weighted sum
 * (docs/MOE.md, "Fused kernel"). Experts are partitioned over the team's ranks: rank r holds global experts
 * [r E/P, (r + 1) E/P). Number formats (xstage/moe/quant.hpp has every convention):
 *   XSTAGE_MOE_W8A8  x: e4m3 codes [T][H] + fp32 1x128 scales [T][H/128];
 *                    w1: e4m3 [E_local][2I][H] (gate rows [0, I), up rows [I, 2I)) + 128x128 scales [E_local][2I/128][H/128];
 *                    w2: e4m3 [E_local][H][I] + 128x128 scales [E_local][H/128][I/128].
 *   XSTAGE_MOE_W4A8  x as W8A8; w1, w2: int4 in the kernel's fragment layout (xstage_moe_pack_int4), scales per
 *                    (row, 128-group) stored K-block-major: w1_scale [E_local][H/128][2I], w2_scale [E_local][I/128][H].
 *   XSTAGE_MOE_BF16  x, w1, w2 bf16 in the W8A8 layouts, every scale NULL (reference runs, not a fast path).
 * The output is fp32 [T][H] per rank: sum over the token's k experts of weight * bf16(expert output).
 * Errors: a non-zero xstage_status and xstage_last_error() naming the bad value (attention.h). */
#ifndef XSTAGE_MOE_H
#define XSTAGE_MOE_H
#include <stdint.h>

#include "xstage/team.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xstage_moe_s* xstage_moe;

enum { XSTAGE_MOE_W8A8 = 0, XSTAGE_MOE_W4A8 = 1, XSTAGE_MOE_BF16 = 2 };
/* The kernel's tile order (all give the same result bit for bit; docs/SCHEDULERS.md). EXPERT_WAVE_LAGGED: Expert-Wave
 * with each wave's Linear-2 tiles after the next wave's Linear-1 tiles. L1_FIRST: Interleaved with a lead past every
 * row, so every Linear-1 tile runs before any Linear-2 tile. */
enum { XSTAGE_MOE_EXPERT_WAVE = 0, XSTAGE_MOE_INTERLEAVED = 1, XSTAGE_MOE_EXPERT_WAVE_LAGGED = 2, XSTAGE_MOE_L1_FIRST = 3 };

/* The layer's symmetric buffers on the team for one shape and format (collective for real teams): hidden H and
 * inter I multiples of 128, experts E a multiple of the world size, 1 <= topk <= E, tokens_per_rank T >= 1 (the
 * capacity: a call passes 0..T tokens per rank). */
int xstage_moe_create(xstage_team team, int hidden, int inter, int experts, int topk, int tokens_per_rank, int format,
                      xstage_moe* out);
void xstage_moe_destroy(xstage_moe layer);
/* One layer call for every rank this process serves, on `stream` (a cudaStream_t; NULL: the default stream, as in
 * CUDA): ordered after the work that wrote the inputs there, and before what reads `out` there.
 * tokens: an array of local_ranks token counts of this call, each 0..T or -1 for T (the rank's x, x_scale, topk_weight, out and
 * topk_index hold that many rows where they say [T]; out's rows past it are not written); NULL: T for every rank.
 * topk_index_all: HOST memory, the routing of EVERY rank of the team, [world][n][k] global expert ids for the call's
 * count n (the same on every rank: this plan refuses counts that differ), each token's k
 * distinct (the dispatch plan is built and validated on the host before anything is enqueued; a real team's ranks must
 * pass the same array; xstage_moe_forward_device below takes each rank's own routing in device memory instead). x, x_scale, topk_weight ([T][k] fp32), out: arrays of local_ranks device pointers (x and out 16-byte aligned, x_scale
 * and topk_weight 4-byte; local rank
 * first_rank + g at g). w1, w1_scale, w2, w2_scale: the experts of the local ranks in global order (E_local =
 * local_ranks * E / world experts; w1 and w2 16-byte aligned, W4A8's scales 16-byte, the others 4-byte). order: XSTAGE_MOE_EXPERT_WAVE, _INTERLEAVED, _EXPERT_WAVE_LAGGED or _L1_FIRST (all give the same bits). Device failures (a
 * peer's rows that never came) are reported by xstage_moe_check. */
int xstage_moe_forward(xstage_moe layer, const int* tokens, const int32_t* topk_index_all, const void* const* x,
                       const float* const* x_scale, const float* const* topk_weight, float* const* out, const void* w1,
                       const float* w1_scale, const void* w2, const float* w2_scale, int order, void* stream);
/* The same call with the routing in DEVICE memory: topk_index, an array of local_ranks device pointers, each [T][k]
 * int32 global expert ids of that rank's tokens (each token's k distinct; the ranks' counts may differ), read on
 * `stream`. The dispatch plan is made
 * on the device and the ranks exchange their counts by peer stores, so nothing of the call waits for the host (a real
 * team's ranks each pass their own routing). The same tables as the host plan's, so the same result bit for bit. An
 * invalid entry is reported by xstage_moe_check (rank, token, slot, value, as the host plan's error); that rank's out
 * is then not written, the other ranks' results are unaffected. The call can be captured in a CUDA graph (after one
 * warm-up call) and replayed on new inputs written into the same buffers; xstage_moe_forward's cannot. */
int xstage_moe_forward_device(xstage_moe layer, const int* tokens, const int32_t* const* topk_index, const void* const* x,
                              const float* const* x_scale, const float* const* topk_weight, float* const* out,
                              const void* w1, const float* w1_scale, const void* w2, const float* w2_scale, int order,
                              void* stream);
/* The tile order the platform model picks for this layer on this team (the harness's `auto`, docs/SCHEDULERS.md):
 * at P = 1 the discrete-event simulator's faster order (on a tie, Interleaved where an expert holds at most two 128-row
 * tiles: kTieInterleavedMaxRows; Expert-Wave with lagged waves where it predicts that >= 5 % faster than both:
 * kLagMinGain; every Linear-1 tile first, XSTAGE_MOE_L1_FIRST, where it predicts that strictly faster than both plain
 * orders), at P > 1 the Burst-Gap design test of the combine stores
 * against M_X = (T_iss^0, R, Q) and the weights' L2 working set. tokens: the tokens per rank to choose for, 1 to the
 * layer's capacity (0: the capacity), for calls of fewer tokens than the layer holds (the order that pays can differ:
 * fewer rows per expert). platform: a preset name or a platform JSON file (NULL: "h200-nvlink4"); skewed: the routing
 * the simulator and the model assume (0 balanced, 1 Zipf). Writes the order (XSTAGE_MOE_EXPERT_WAVE,
 * XSTAGE_MOE_INTERLEAVED, XSTAGE_MOE_EXPERT_WAVE_LAGGED or XSTAGE_MOE_L1_FIRST), the lead D and one line of reason (truncated to
 * reason_bytes). */
int xstage_moe_auto_order(xstage_moe layer, int tokens, int skewed, const char* platform, int* order, int* lead,
                          char* reason, int reason_bytes);
/* Waits for `stream` (NULL: the default stream) and the team's own, then reports the first device-side failure of
 * the layer (rank, and the peer or row it waited for), clearing it. */
int xstage_moe_check(xstage_moe layer, void* stream, const char* what);
/* W4A8 weights into the fragment layout the kernel reads, on the device: `matrices` back-to-back [rows][K] int4
 * matrices in two's complement (two per byte, even k in the low nibble; values in [-7, 7]) at `twos` into `out` (the
 * same size; may equal `twos`; both 4-byte aligned). rows a multiple of 64, K of 128. Synchronous on `stream`. A -8 anywhere is an error
 * naming its matrix, row and column, and nothing is written. */
int xstage_moe_pack_int4(const void* twos, void* out, int matrices, int rows, int K, void* stream);

#ifdef __cplusplus
}
#endif
#endif
