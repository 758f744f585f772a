// The Ulysses attention layer (ulysses_layer.hpp).
#include "ulysses_layer.hpp"

#include <cmath>

#include "../attention/sm90_fwd.hpp"
#include "ulysses_a2a.cuh"
#include "xstage/common/error.hpp"

namespace xstage::ulysses {
namespace {
constexpr int kSlotIn = 0, kSlotOut = 1;  // signal slots: pre-attention data, output tiles

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(detail::concat(what, " failed: ", cudaGetErrorString(e)));
}
}  // namespace

std::string check_shape(const Shape& s, int world) {
  auto bad = [](const char* name, int v, const char* rule) { return detail::concat(name, " = ", v, " ", rule); };
  if (s.batch < 1) return bad("batch", s.batch, "must be >= 1");
  if (s.seq_per_rank < 1) return bad("seq_per_rank", s.seq_per_rank, "must be >= 1");
  if (s.heads < 1) return bad("heads", s.heads, "must be >= 1");
  if (s.heads % world != 0)
    return detail::concat("heads = ", s.heads, " is not divisible by the world size ", world,
                          " (Ulysses gives each rank heads / P whole heads; pad the heads or use a world that divides them)");
  if (s.head_dim != 64 && s.head_dim != 128) return bad("head_dim", s.head_dim, "is not supported (64 or 128)");
  if (s.dtype != XSTAGE_DTYPE_BF16 && s.dtype != XSTAGE_DTYPE_FP16)
    return bad("dtype", s.dtype, "is not an xstage_dtype (0 = bf16, 1 = fp16)");
  if (int64_t(s.seq_per_rank) * world > (int64_t(1) << 30)) return "sequence length world * seq_per_rank is too large";
  if (!std::isfinite(s.softmax_scale))  // as the attention ABI: -inf and +inf refused, any finite value taken
    return detail::concat("softmax_scale = ", s.softmax_scale, " must be finite (<= 0 selects 1/sqrt(head_dim))");
  return "";
}

Layer::Layer(runtime::Team& team, const Shape& shape) : team_(team), shape_(shape) {
  if (const std::string why = check_shape(shape, team.world()); !why.empty()) throw UsageError("ulysses layer: " + why);
  const size_t bytes = tensor_bytes();  // q per rank == qh per rank == output per rank
  qh_ = team.alloc(bytes, "ulysses qh");
  kh_ = team.alloc(bytes, "ulysses kh");
  vh_ = team.alloc(bytes, "ulysses vh");
  out_[0] = team.alloc(bytes, "ulysses out 0");
  out_[1] = team.alloc(bytes, "ulysses out 1");
  signals_ = std::make_unique<runtime::SignalSet>(team, 2, "ulysses signals");
  ok(cudaMalloc(&oh_, bytes * size_t(team.local_ranks())), "cudaMalloc (local attention output)");
  // The copy kernel is bandwidth-bound: a few CTAs per SM of each rank's share keep enough stores in flight.
  a2a_ctas_ = team.sms_per_rank();
}

Layer::~Layer() {
  if (oh_) cudaFree(oh_);
}

size_t Layer::tensor_bytes() const {
  return size_t(shape_.batch) * shape_.seq_per_rank * shape_.heads * shape_.head_dim * 2;
}

void* Layer::output(int rank) const { return out_[epoch_ % 2]->local(rank); }
void* Layer::next_output(int rank) const { return out_[(epoch_ + 1) % 2]->local(rank); }

// Head-partitioned attention of every local rank in one launch: batch = local ranks * batch (the emulated
// copies of qh sit back to back), S = P * seq_per_rank, heads / P heads.
xstage_attn_fwd_params Layer::attn_params(void* o) const {
  const int P = team_.world(), S = P * shape_.seq_per_rank, hp = shape_.heads / P, D = shape_.head_dim;
  xstage_attn_fwd_params p{};
  p.q = qh_->local(team_.first_rank());
  p.k = kh_->local(team_.first_rank());
  p.v = vh_->local(team_.first_rank());
  p.o = o;
  p.batch = team_.local_ranks() * shape_.batch;
  p.seqlen_q = p.seqlen_kv = S;
  p.heads = hp;
  p.head_dim = D;
  const int64_t st[3] = {int64_t(S) * hp * D, int64_t(hp) * D, D};
  for (int i = 0; i < 3; ++i) p.q_stride[i] = p.k_stride[i] = p.v_stride[i] = p.o_stride[i] = st[i];
  p.dtype = shape_.dtype;
  p.softmax_scale = shape_.softmax_scale;
  if (team_.local_ranks() > 1)
    XSTAGE_CHECK(qh_->emulated_stride() == tensor_bytes(), "emulated copies of qh are not back to back");
  return p;
}

A2AArgs Layer::a2a_args(int direction, int slot) const {
  A2AArgs a;
  a.view = team_.view();
  a.ctas_per_rank = a2a_ctas_;
  a.batch = shape_.batch;
  a.seq_per_rank = shape_.seq_per_rank;
  a.heads = shape_.heads;
  a.head_dim = shape_.head_dim;
  a.direction = A2ADirection(direction);
  a.signal = signals_->table();
  a.slot = slot;
  return a;
}

void Layer::check_inputs(const void* const* q, const void* const* k, const void* const* v) const {
  for (int g = 0; g < team_.local_ranks(); ++g)
    XSTAGE_REQUIRE(q[g] && k[g] && v[g], "ulysses layer: q/k/v of local rank ", team_.first_rank() + g, " is null");
}

void Layer::pre_a2a(const void* const* q, const void* const* k, const void* const* v, cudaStream_t s) {
  A2AArgs a = a2a_args(int(A2ADirection::kSeqToHead), kSlotIn);
  a.tensors = 3;
  check_inputs(q, k, v);  // (forward checked them before its epoch turned; the timing harness calls pre_a2a alone)
  for (int g = 0; g < team_.local_ranks(); ++g) {
    a.src[0][g] = static_cast<const char*>(q[g]);
    a.src[1][g] = static_cast<const char*>(k[g]);
    a.src[2][g] = static_cast<const char*>(v[g]);
  }
  a.dst[0] = qh_->peers();
  a.dst[1] = kh_->peers();
  a.dst[2] = vh_->peers();
  ok(launch_a2a(a, s), "ulysses pre-attention all-to-all");
  sent_[kSlotIn] += uint32_t(a2a_ctas_);
  signals_->wait(kSlotIn, sent_[kSlotIn], s);
}

void Layer::attention_fused(cudaStream_t s) {
  const attention::PeerOutput po =
      attention::contiguous_peer_output(team_, out_[epoch_ % 2]->peers(), shape_.batch, shape_.seq_per_rank,
                                        shape_.heads, shape_.head_dim, signals_->table(), kSlotOut);
  const xstage_attn_fwd_params p = attn_params(nullptr);
  if (const std::string why = attention::check_peer_output(p, po); !why.empty())
    throw UsageError("ulysses layer: " + why);
  int ctas = 0;
  ok(attention::run_fwd_sm90_to_peers(p, po, &ctas, s), "ulysses fused attention");
  sent_[kSlotOut] += uint32_t(ctas);
}

void Layer::attention_local(cudaStream_t s) {
  const xstage_attn_fwd_params p = attn_params(oh_);
  // Same rank partition of the SMs as the fused launch, so FA-only and Fused time the same schedule.
  ok(attention::run_fwd_sm90_grouped(p, team_.local_ranks(), team_.sms_per_rank(), s),
     "ulysses attention (local epilogue)");
}

void Layer::post_a2a(cudaStream_t s) {
  A2AArgs a = a2a_args(int(A2ADirection::kHeadToSeq), kSlotOut);
  a.tensors = 1;
  for (int g = 0; g < team_.local_ranks(); ++g) a.src[0][g] = static_cast<const char*>(oh_) + tensor_bytes() * g;
  a.dst[0] = out_[epoch_ % 2]->peers();
  ok(launch_a2a(a, s), "ulysses post-attention all-to-all");
  sent_[kSlotOut] += uint32_t(a2a_ctas_);
}

void Layer::wait_output(cudaStream_t s) { signals_->wait(kSlotOut, sent_[kSlotOut], s); }

void Layer::forward(const void* const* q, const void* const* k, const void* const* v, Variant variant,
                    cudaStream_t s) {
  // Every input checked before the epoch turns: a refused call must leave the double-buffered outputs as they were
  // (and the ranks of a real team in step).
  check_inputs(q, k, v);
  begin_epoch();
  pre_a2a(q, k, v, s);
  if (variant == Variant::kFused) {
    attention_fused(s);
  } else {
    attention_local(s);
    post_a2a(s);
  }
  wait_output(s);
}

}  // namespace xstage::ulysses
