#pragma once
// Host entry of the sm_90a forward kernel. Called by api.cpp with parameters already validated
// (xstage_attn_fwd_check passed); picks the compile-time variant (dtype, head dim) and the epilogue.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "xstage/attention.h"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::attention {

// Attention whose output tiles go to their destination ranks (the Ulysses post-attention all-to-all).
// The launch serves view.ranks ranks: p's batch holds view.ranks * batch entries, rank first_rank + g
// owning entries [g * batch, (g + 1) * batch) (one rank for real ranks; all of them when emulated). p is the
// head-partitioned attention: seqlen_q = world * seq_per_rank (the full sequence), p.heads per rank.
// Rank d's output [batch, seq_per_rank, world * p.heads, head_dim] receives rows [d * seq_per_rank, ...)
// of every source rank's heads, at heads [s * p.heads, (s + 1) * p.heads). p.o is not used.
struct PeerOutput {
  runtime::TeamView view;
  void* dst[runtime::kMaxRanks] = {};  // rank d's output as this process sees it (LSA / emulated copy)
  int64_t dst_stride[3] = {};          // its element strides (batch, seq, head); dim stride 1
  int batch = 0;                       // per rank
  int seq_per_rank = 0;
  int sms_per_rank = 0;                // SMs each rank's CTAs may occupy (Team::sms_per_rank())
  runtime::PeerTable signal;           // completion counters (SignalSet::table())
  int slot = 0;                        // counter (slot, source) on every destination is raised once per CTA
};

// The usual destination: every rank's contiguous [batch, seq_per_rank, heads_total, head_dim] copy of one
// symmetric buffer (`dst`), served by `team`'s ranks on their SM share; counter (slot, source) of `signal`.
inline PeerOutput contiguous_peer_output(const runtime::Team& team, const runtime::PeerTable& dst, int batch,
                                         int seq_per_rank, int heads_total, int head_dim,
                                         const runtime::PeerTable& signal, int slot) {
  PeerOutput po;
  po.view = team.view();
  po.batch = batch;
  po.seq_per_rank = seq_per_rank;
  po.sms_per_rank = team.sms_per_rank();
  po.signal = signal;
  po.slot = slot;
  po.dst_stride[2] = head_dim;
  po.dst_stride[1] = int64_t(heads_total) * head_dim;
  po.dst_stride[0] = int64_t(seq_per_rank) * po.dst_stride[1];
  for (int d = 0; d < team.world(); ++d) po.dst[d] = dst.base[d];
  return po;
}

cudaError_t run_fwd_sm90(const xstage_attn_fwd_params& p, cudaStream_t stream);
// The same, the launch partitioned into `groups` rank groups of sms_per_group SMs each (p.batch = groups x
// the per-rank batch), as the peer-store launch partitions emulated ranks.
cudaError_t run_fwd_sm90_grouped(const xstage_attn_fwd_params& p, int groups, int sms_per_group, cudaStream_t stream);
// "" when `out` fits `p`, else a message naming the bad value.
std::string check_peer_output(const xstage_attn_fwd_params& p, const PeerOutput& out);
// *ctas_per_rank (if not null) receives the CTAs each source rank launched: every one of them raises the
// destination's counter once, so a receiver waits for epoch * ctas_per_rank from every source.
cudaError_t run_fwd_sm90_to_peers(const xstage_attn_fwd_params& p, const PeerOutput& out, int* ctas_per_rank,
                                  cudaStream_t stream);

}  // namespace xstage::attention
