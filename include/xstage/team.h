/* xstage teams: the ranks a distributed kernel runs over, through the C ABI of libxstage_attention.so.
 * A team is real (one process per GPU over NCCL 2.28: every rank calls xstage_team_create_nccl with the
 * same unique id, e.g. exchanged through a torch.distributed group) or emulated (P ranks on one GPU in
 * one process). Symmetric buffers are allocated per team; kernels address every rank's copy.
 * Errors: a non-zero xstage_status and xstage_last_error() naming the bad value (attention.h).
 * Lifetimes: buffers, Ulysses layers and MoE layers keep their team; free them before xstage_team_destroy (it does not
 * free them, and one freed after its team touches freed memory). Every destroy / free takes NULL (a no-op); a handle
 * destroyed twice is undefined. */
#ifndef XSTAGE_TEAM_H
#define XSTAGE_TEAM_H
#include <stddef.h>
#include <stdint.h>

#include "xstage/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XSTAGE_NCCL_ID_BYTES 128

typedef struct xstage_team_s* xstage_team;
typedef struct xstage_buffer_s* xstage_buffer;

/* A fresh NCCL unique id (rank 0 makes it, every rank passes the same bytes to create_nccl). */
int xstage_nccl_unique_id(unsigned char* out, int out_bytes);
/* Real team: this process is `rank` of `world` on CUDA device `device`; collective over all ranks.
 * Fails (XSTAGE_ERR_CUDA, the message saying how many of the ranks this rank reaches by load/store) when the ranks
 * cannot reach each other by load/store (no NVLink/P2P). A world above 8 is refused after NCCL's set-up. Making a team
 * or a buffer sets the calling thread's current CUDA device to the team's. */
int xstage_team_create_nccl(int rank, int world, int device, const unsigned char* id, int id_bytes, double timeout_s,
                            xstage_team* out);
/* Emulated team: `world` ranks (1 to 8) on CUDA device `device` (< 0: the current one), each with SMs / world SMs.
 * timeout_s (here and for real teams, whose world is at most 8 too): how long a device-side wait runs before it records
 * a failure; positive, at most 1e9. */
int xstage_team_create_emulated(int world, int device, double timeout_s, xstage_team* out);
void xstage_team_destroy(xstage_team team);
/* world size, first rank served here, ranks served here (1 real, world emulated), emulated flag, SMs per rank. */
int xstage_team_info(xstage_team team, int* world, int* first_rank, int* local_ranks, int* emulated, int* sms_per_rank);
/* One line describing the team ("emulated: ... (no NVLink ...)"); copied into buf (NUL-terminated). */
int xstage_team_label(xstage_team team, char* buf, int buf_bytes);
/* Waits for `stream` (a cudaStream_t; NULL: the default stream, as in CUDA) and the team's own stream, then
 * reports a device-side failure (e.g. a signal that never came: the message names the rank, the peer and
 * the slot). */
int xstage_team_check(xstage_team team, void* stream, const char* what);

/* A zero-filled buffer of `bytes` per rank (collective for real teams). */
int xstage_buffer_alloc(xstage_team team, size_t bytes, const char* name, xstage_buffer* out);
void xstage_buffer_free(xstage_buffer buf);
/* This process's copy of rank `rank` (a global rank this process serves: first_rank .. first_rank + local_ranks - 1),
 * or NULL (see xstage_last_error). */
void* xstage_buffer_ptr(xstage_buffer buf, int rank);

/* Attention with the Ulysses post-attention all-to-all fused into the epilogue, for every rank this
 * process serves. p: the head-partitioned attention of all local ranks (batch = local ranks x per-rank
 * batch; rank first_rank + g owns batch entries [g*b, (g+1)*b); seqlen_q = world * seq_per_rank; p->heads
 * per rank; p->o ignored). out: a team buffer holding, per rank, the contiguous output
 * [b, seq_per_rank, world * p->heads, head_dim]. Every finished tile is stored to its destination rank;
 * then (same stream) each local rank waits until every source's tiles have landed: the team counts its calls and
 * the CTAs they launched, so calls of different shapes may follow each other (every rank must make the same calls,
 * in the same order). epoch: 0 lets the library count; otherwise it must be this call's number on the team (1 for
 * the first, then 2, ...: a check of the caller's count; another number is refused by name). A refused call
 * counts for nothing. Runs on `stream` (a cudaStream_t; NULL: the default
 * stream, as in CUDA): ordered after the work that wrote q, k, v there, and before what reads out there. */
int xstage_attn_fwd_to_peers(const xstage_attn_fwd_params* p, xstage_team team, xstage_buffer out, int seq_per_rank,
                             uint32_t epoch, void* stream);

#ifdef __cplusplus
}
#endif
#endif
