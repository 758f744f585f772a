#pragma once
// The Ulysses attention layer over a Team (ranks real or emulated): per rank, q/k/v (batch, seq_per_rank,
// heads, head_dim) sequence-partitioned in, attention over the full sequence, output (batch, seq_per_rank,
// heads, head_dim) out.
//
//   pre_a2a      q/k/v -> head-partitioned qh/kh/vh (batch, S, heads/P, d) on every rank: SM stores through
//                peer pointers (one copy kernel), completion signals, and a wait before attention reads them
//   Fused        attention whose epilogue stores every output tile straight into its destination rank's
//                output and goes on to its next tile (PeerStoreEpilogue); per-CTA completion signals
//   Serial       attention into a local head-partitioned buffer, then the same copy kernel back
//   wait_output  (stream) every source's tiles of this epoch have landed in this rank's output
//
// Outputs are double-buffered by epoch (a rank one epoch ahead never writes the buffer a slower peer is
// still reading), so output(rank) is valid until the second next forward. qh/kh/vh are single: a rank
// writes its peers' next-epoch inputs only after its own wait_output, i.e. after every rank's attention of
// this epoch has finished reading them. Heads must divide by P (clear error otherwise); any sequence length
// per rank (tiles that straddle two destinations are handled in the epilogue).
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "xstage/attention.h"
#include "xstage/runtime/team.hpp"

namespace xstage::ulysses {

struct Shape {
  int batch = 1, seq_per_rank = 0, heads = 0, head_dim = 128;
  int dtype = XSTAGE_DTYPE_BF16;  // an xstage_dtype (int: a C caller's bad value is checked, not undefined)
  float softmax_scale = 0.f;  // <= 0: 1 / sqrt(head_dim)
};

enum class Variant { kFused, kSerial };

struct A2AArgs;  // ulysses_a2a.cuh

// "" when the shape fits a team of `world` ranks, else a message naming the bad value.
std::string check_shape(const Shape& s, int world);

class Layer {
 public:
  Layer(runtime::Team& team, const Shape& shape);
  ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const Shape& shape() const { return shape_; }
  runtime::Team& team() const { return team_; }
  size_t tensor_bytes() const;  // one rank's q (or output): batch * seq_per_rank * heads * head_dim * 2

  // The whole layer: q/k/v[g] are local rank first_rank + g's inputs (contiguous); outputs via output().
  void forward(const void* const* q, const void* const* k, const void* const* v, Variant variant, cudaStream_t s);
  // This epoch's output of local rank `rank` (contiguous (batch, seq_per_rank, heads, head_dim)).
  void* output(int rank) const;
  // The buffer the next forward will write for local rank `rank` (e.g. to poison it in a test).
  void* next_output(int rank) const;
  uint32_t epoch() const { return epoch_; }

  // Pieces, for the timing harness (stream-ordered; keep the real-rank rule above: pre_a2a only after the
  // previous epoch's wait_output).
  void begin_epoch() { ++epoch_; }
  void pre_a2a(const void* const* q, const void* const* k, const void* const* v, cudaStream_t s);  // + wait
  void attention_fused(cudaStream_t s);   // into this epoch's output on every rank, signals, no wait
  void attention_local(cudaStream_t s);   // FA only: into the local head-partitioned buffer
  void post_a2a(cudaStream_t s);          // the Serial all-to-all from that buffer, signals, no wait
  void wait_output(cudaStream_t s);       // every signal sent so far has arrived
  // attention_local's output: every local rank's (batch, S, heads / P, head_dim), back to back.
  const void* local_attention_output() const { return oh_; }

 private:
  // UsageError naming the first local rank whose q, k or v is null.
  void check_inputs(const void* const* q, const void* const* k, const void* const* v) const;
  xstage_attn_fwd_params attn_params(void* o) const;
  A2AArgs a2a_args(int direction, int slot) const;  // the copy kernel's arguments common to both ways
  runtime::Team& team_;
  Shape shape_;
  std::unique_ptr<runtime::SymmetricBuffer> qh_, kh_, vh_, out_[2];
  std::unique_ptr<runtime::SignalSet> signals_;
  void* oh_ = nullptr;  // local head-partitioned attention output of every local rank (Serial, FA only)
  uint32_t epoch_ = 0;
  uint32_t sent_[2] = {0, 0};  // per slot: signals each source has sent each destination so far
  int a2a_ctas_ = 0;
};

}  // namespace xstage::ulysses
