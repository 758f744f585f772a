// Host side of the expert-parallel unfused MoE baseline (unfused_ep.hpp): validation, the all-to-all-v plan
// (moe::make_a2a_plan) and its permutations, the NCCL / emulated all-to-all-v, launches of unfused.cu's
// kernels; the expert GEMMs are UnfusedMoe's (detail::GemmEngine, detail::ExpertStage in unfused.cpp).
#include "unfused_ep.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "unfused_kernels.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/a2a_plan.hpp"
#include "xstage/moe/dispatch_plan.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/moe/shapes.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::moe_bench {

using ::xstage::RuntimeError;
using ::xstage::UsageError;

namespace {

template <class... Args>
std::string cat(const Args&... a) {
  return ::xstage::detail::concat(a...);
}

constexpr int kQ = moe::kQuantBlock;  // 128

void require_device_ptr(const void* p, std::size_t align, const std::string& what) {
  XSTAGE_REQUIRE(p != nullptr, what, " is null");
  XSTAGE_REQUIRE(reinterpret_cast<std::uintptr_t>(p) % align == 0, what, " must be ", align,
                 "-byte aligned (got address ", p, ")");
}

void upload(detail::DeviceBuffer& dst, const std::vector<int>& v, int rank) {
  dst.reserve(v.size() * sizeof(int));
  if (!v.empty())
    XSTAGE_CUDA_CHECK(cudaMemcpy(dst.p, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice), rank);
}

// FNV-1a over the routing, for the real-rank agreement check.
long long routing_hash(const std::vector<std::int32_t>& index) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::int32_t v : index) {
    h ^= std::uint32_t(v);
    h *= 1099511628211ull;
  }
  return static_cast<long long>(h >> 1);  // non-negative
}

}  // namespace

// One local rank: its experts (stage), the fixed source-side buffers (sized by T*k at construction) and the
// receive-side buffers (grown by set_routing to the routing's rows).
struct UnfusedEpMoe::RankState {
  int rank;
  detail::ExpertStage stage;
  detail::DeviceBuffer send;        // [T*k][row_bytes]: packed rows in send order (destination, expert, t, j)
  detail::DeviceBuffer ret;         // [T*k][H] bf16: the results of those rows, back in send order
  detail::DeviceBuffer send_token;  // [T*k] int: token of each send row
  detail::DeviceBuffer slot_row;    // [T*k] int: send row of (t, j), the weighted sum's table
  detail::DeviceBuffer recv;        // [n_recv][row_bytes]: received rows, chunks ordered by source rank
  detail::DeviceBuffer back;        // [n_recv][H] bf16: their results in the same chunk order
  detail::DeviceBuffer row_src;     // [padded rows] int: chunk row of each expert row (-1: padding)
  detail::DeviceBuffer back_src;    // [n_recv] int: expert row of each chunk row
  int n_recv = 0;

  RankState(detail::GemmEngine& eng, int experts, int r, std::size_t send_rows, std::size_t row_bytes, int hidden)
      : rank(r),
        stage(eng, experts, cat("UnfusedEpMoe rank ", r)),
        send(send_rows * row_bytes),
        ret(send_rows * std::size_t(hidden) * 2),
        send_token(send_rows * sizeof(int)),
        slot_row(send_rows * sizeof(int)) {}
};

UnfusedEpMoe::UnfusedEpMoe(runtime::Team& team, const UnfusedShape& shape, WeightFormat format, UnfusedOptions opt)
    : team_(team), shape_(shape), format_(format) {
  if (const std::string why = check_unfused_shape(shape); !why.empty()) throw UsageError(why);
  world_ = team.world();
  first_rank_ = team.first_rank();
  const int P = world_, H = shape.hidden, E = shape.experts, T = shape.tokens, k = shape.topk;
  XSTAGE_REQUIRE(E % P == 0, "unfused EP MoE: experts = ", E, " is not a multiple of the world size ", P,
                 " (each rank holds E/P experts; E % P = ", E % P, ")");
  const long long worst = moe::max_recv_rows(P, T, k, E / P, kRowAlign);
  XSTAGE_REQUIRE(worst <= (1LL << 30), "unfused EP MoE: up to ", worst, " padded rows per rank (world ", P,
                 ", tokens per rank ", T, ", topk ", k, ") exceed 2^30");
  if (team.is_emulated()) {
    XSTAGE_CHECK(team.local_ranks() == P, "unfused EP MoE: an emulated team serves ", team.local_ranks(),
                 " of its ", P, " ranks");
  } else {
    XSTAGE_CHECK(team.communicator() != nullptr && team.local_ranks() == 1,
                 "unfused EP MoE: a real team needs a communicator and one local rank");
  }
  // One dispatched row: H codes, then H/128 fp32 scales (H/32 bytes), padded to 16 bytes (vector copies).
  row_bytes_ = (std::size_t(H) + H / 32 + 15) / 16 * 16;
  engine_ = std::make_unique<detail::GemmEngine>(H, shape.inter, format, opt);
  for (int g = 0; g < team.local_ranks(); ++g)
    ranks_.push_back(
        std::make_unique<RankState>(*engine_, E / P, first_rank_ + g, std::size_t(T) * k, row_bytes_, H));
}

UnfusedEpMoe::~UnfusedEpMoe() = default;

Int4Path UnfusedEpMoe::int4_path() const { return engine_->int4_path(); }
const std::string& UnfusedEpMoe::int4_path_note() const { return engine_->int4_note(); }

void UnfusedEpMoe::check_local(int g, const char* what) const {
  XSTAGE_REQUIRE(g >= 0 && g < local_ranks(), "UnfusedEpMoe::", what, ": local rank g = ", g,
                 " is out of range [0, ", local_ranks(), ") (this process serves ranks ", first_rank_, "..",
                 first_rank_ + local_ranks() - 1, " of ", world_, ")");
}

void UnfusedEpMoe::set_weights(int g, const std::uint8_t* w1, const float* w1_scale, const std::uint8_t* w2,
                               const float* w2_scale) {
  check_local(g, "set_weights");
  ranks_[g]->stage.set_weights(w1, w1_scale, w2, w2_scale);
}

void UnfusedEpMoe::set_routing(const std::int32_t* topk_index_all_host) {
  XSTAGE_REQUIRE(topk_index_all_host != nullptr, "UnfusedEpMoe::set_routing: top-k indices are null");
  const int P = world_, T = shape_.tokens, k = shape_.topk, E = shape_.experts, H = shape_.hidden;
  const std::size_t per_rank = std::size_t(T) * k;
  for (int r = 0; r < P; ++r) moe::validate_topk(topk_index_all_host + r * per_rank, T, k, E, r);
  const std::vector<std::int32_t> index(topk_index_all_host, topk_index_all_host + P * per_rank);
  if (!team_.is_emulated())  // the counts below must be the same on every rank, or NCCL waits forever
    team_.communicator()->require_same(routing_hash(index), "UnfusedEpMoe::set_routing: hash of the routing");

  const moe::DispatchPlan plan(index, T, k, moe::make_placement(E, P), kRowAlign);
  const moe::A2aPlan a2a = moe::make_a2a_plan(plan);
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize(), first_rank_);  // no run in flight reads the tables or buffers
  have_routing_ = false;
  for (auto& st : ranks_) {
    const int r = st->rank, el = E / P;
    XSTAGE_CHECK(a2a.send_rows(r) == int(per_rank), "unfused EP MoE: rank ", r, " sends ", a2a.send_rows(r),
                 " rows, expected T*k = ", per_rank);
    // Source side: which token each send row carries, and where (t, j)'s result comes back.
    std::vector<int> send_token(per_rank, -1), slot_row(per_rank);
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const int row = a2a.send_row[(std::size_t(r) * T + t) * k + j];
        send_token[std::size_t(row)] = t;
        slot_row[std::size_t(t) * k + j] = row;
      }
    // Receive side: expert blocks of the rank's local experts, and the chunk row <-> expert row maps.
    st->stage.set_rows(plan.local_tokens(r));
    for (int le = 0; le <= el; ++le)
      XSTAGE_CHECK(st->stage.offsets()[le] == plan.view().offset(r, le) * kRowAlign, "unfused EP MoE: rank ", r,
                   " local expert ", le, " starts at row ", st->stage.offsets()[le], ", the dispatch plan says ",
                   plan.view().offset(r, le) * kRowAlign);
    const int rows = st->stage.rows(), n = a2a.recv_rows(r);
    XSTAGE_CHECK(rows == plan.recv_rows(r), "unfused EP MoE: rank ", r, " has ", rows, " padded rows, the plan ",
                 plan.recv_rows(r));
    const std::vector<int>& to_row = a2a.chunk_to_recv_row[std::size_t(r)];
    std::vector<int> row_src(static_cast<std::size_t>(rows), -1), back_src(static_cast<std::size_t>(n), -1);
    for (int i = 0; i < n; ++i) {
      const int p = to_row[std::size_t(i)];
      XSTAGE_CHECK(p >= 0 && p < rows && row_src[std::size_t(p)] < 0, "unfused EP MoE: rank ", r, " chunk row ", i,
                   " maps to expert row ", p, " (of ", rows, "), taken or out of range");
      row_src[std::size_t(p)] = i;
      back_src[std::size_t(i)] = p;
    }
    st->n_recv = n;
    st->recv.reserve(std::size_t(n) * row_bytes_);
    st->back.reserve(std::size_t(n) * H * 2);
    upload(st->send_token, send_token, r);
    upload(st->slot_row, slot_row, r);
    upload(st->row_src, row_src, r);
    upload(st->back_src, back_src, r);
  }
  counts_ = a2a.send_counts;
  send_offset_ = a2a.send_offset;
  recv_offset_ = a2a.recv_offset;
  have_routing_ = true;
}

// One all-to-all-v. Dispatch: rank s's chunk for d (count(s, d) packed rows at send_offset[s][d] of s's send
// buffer) lands at recv_offset[d][s] of d's receive buffer. Combine: the transpose, bf16 rows of H: d's chunk
// for s (at recv_offset[d][s] of d's back buffer) lands at send_offset[s][d] of s's return buffer, i.e. in
// s's send order.
void UnfusedEpMoe::all_to_all_v(Direction dir, cudaStream_t stream) {
  const int P = world_;
  const bool dispatch = dir == Direction::kDispatch;
  const std::size_t rb = dispatch ? row_bytes_ : std::size_t(shape_.hidden) * 2;
  const char* what = dispatch ? "unfused EP dispatch all-to-all-v" : "unfused EP combine all-to-all-v";
  auto at = [&](const std::vector<int>& v, int a, int b) { return v[std::size_t(a) * P + b]; };
  // Rows `from` sends to `to`, the first of them in from's source buffer, where they land in to's buffer.
  auto rows = [&](int from, int to) { return dispatch ? at(counts_, from, to) : at(counts_, to, from); };
  auto src_row = [&](int from, int to) { return dispatch ? at(send_offset_, from, to) : at(recv_offset_, from, to); };
  auto dst_row = [&](int to, int from) { return dispatch ? at(recv_offset_, to, from) : at(send_offset_, to, from); };
  auto src_buf = [&](RankState& s) { return static_cast<std::uint8_t*>(dispatch ? s.send.p : s.back.p); };
  auto dst_buf = [&](RankState& s) { return static_cast<std::uint8_t*>(dispatch ? s.recv.p : s.ret.p); };

  if (team_.is_emulated()) {
    // Emulated ranks: all P buffers live on this GPU; each chunk is a LOCAL device-to-device copy on the
    // stream, not an NVLink transfer (no communication time is modelled).
    for (int from = 0; from < P; ++from)
      for (int to = 0; to < P; ++to) {
        const int n = rows(from, to);
        if (n == 0) continue;
        XSTAGE_CUDA_CHECK(cudaMemcpyAsync(dst_buf(*ranks_[to]) + std::size_t(dst_row(to, from)) * rb,
                                          src_buf(*ranks_[from]) + std::size_t(src_row(from, to)) * rb,
                                          std::size_t(n) * rb, cudaMemcpyDeviceToDevice, stream),
                          from);
      }
    return;
  }
  // Real ranks: what torch's all_to_all_single with splits issues: one group of ncclSend / ncclRecv per peer
  // with rows (self included), on the stream.
  runtime::Communicator& comm = *team_.communicator();
  const int me = first_rank_;
  RankState& st = *ranks_[0];
  runtime::check_nccl(ncclGroupStart(), "ncclGroupStart", me);
  try {
    for (int p = 0; p < P; ++p) {
      if (const int n = rows(me, p); n > 0)
        runtime::check_nccl(ncclSend(src_buf(st) + std::size_t(src_row(me, p)) * rb, std::size_t(n) * rb, ncclUint8,
                                     p, comm.nccl(), stream),
                            what, me);
      if (const int n = rows(p, me); n > 0)
        runtime::check_nccl(ncclRecv(dst_buf(st) + std::size_t(dst_row(me, p)) * rb, std::size_t(n) * rb, ncclUint8,
                                     p, comm.nccl(), stream),
                            what, me);
    }
  } catch (...) {
    ncclGroupEnd();  // close the group; the error above is the one reported
    throw;
  }
  comm.enqueued(ncclGroupEnd(), what);
}

void UnfusedEpMoe::run(const UnfusedRankIO* io, cudaStream_t stream) {
  XSTAGE_REQUIRE(io != nullptr, "UnfusedEpMoe::run: io is null (one UnfusedRankIO per local rank expected)");
  for (const auto& st : ranks_)
    XSTAGE_REQUIRE(st->stage.has_weights(), "UnfusedEpMoe::run: set_weights has not been called for local rank ",
                   st->rank - first_rank_, " (rank ", st->rank, ")");
  XSTAGE_REQUIRE(have_routing_, "UnfusedEpMoe::run: set_routing has not been called");
  for (int g = 0; g < local_ranks(); ++g) {
    const std::string who = cat("UnfusedEpMoe::run: io[", g, "] (rank ", first_rank_ + g, ")");
    require_device_ptr(io[g].x, 16, who + ".x");
    require_device_ptr(io[g].x_scale, 4, who + ".x_scale");
    require_device_ptr(io[g].topk_weight, 4, who + ".topk_weight");
    require_device_ptr(io[g].out, 16, who + ".out");
  }
  const int H = shape_.hidden, T = shape_.tokens, k = shape_.topk, TK = T * k;
  const std::int64_t rb = std::int64_t(row_bytes_);

  // 1. pack: codes, then scales, of each send row's token.
  for (int g = 0; g < local_ranks(); ++g) {
    RankState& st = *ranks_[g];
    auto* send = st.send.as<std::uint8_t>();
    XSTAGE_CUDA_CHECK(detail::launch_gather_rows(io[g].x, H, st.send_token.as<int>(), TK, H, send, rb, stream),
                      st.rank);
    XSTAGE_CUDA_CHECK(detail::launch_gather_rows(io[g].x_scale, H / kQ * 4, st.send_token.as<int>(), TK, H / kQ * 4,
                                                 send + H, rb, stream),
                      st.rank);
  }
  // 2. dispatch.
  all_to_all_v(Direction::kDispatch, stream);
  // 3. expert rows, GEMMs, and the results back into chunk order.
  for (int g = 0; g < local_ranks(); ++g) {
    RankState& st = *ranks_[g];
    detail::ExpertStage& sg = st.stage;
    if (sg.rows() > 0) {
      const auto* recv = st.recv.as<const std::uint8_t>();
      XSTAGE_CUDA_CHECK(detail::launch_permute(recv, rb, reinterpret_cast<const float*>(recv + H), rb / 4, H,
                                               st.row_src.as<int>(), sg.row_expert(), sg.expert_off(), sg.rows(),
                                               sg.xp(), sg.xps(), stream),
                        st.rank);
    }
    sg.run(stream);  // W4A8: converts the weights even when the rank received nothing (every call)
    XSTAGE_CUDA_CHECK(detail::launch_gather_rows(sg.y2(), std::int64_t(H) * 2, st.back_src.as<int>(), st.n_recv,
                                                 std::int64_t(H) * 2, st.back.p, std::int64_t(H) * 2, stream),
                      st.rank);
  }
  // 4. combine.
  all_to_all_v(Direction::kCombine, stream);
  // 5. weighted sum at the source, UnfusedMoe's kernel on the rows in send order.
  for (int g = 0; g < local_ranks(); ++g) {
    RankState& st = *ranks_[g];
    XSTAGE_CUDA_CHECK(detail::launch_combine(st.ret.as<const std::uint16_t>(), io[g].topk_weight,
                                             st.slot_row.as<int>(), T, k, H, io[g].out, stream),
                      st.rank);
  }
}

void UnfusedEpMoe::poison(cudaStream_t stream) {
  for (auto& st : ranks_) {
    st->stage.poison(stream);
    for (detail::DeviceBuffer* b : {&st->send, &st->ret, &st->recv, &st->back})
      if (b->bytes > 0) XSTAGE_CUDA_CHECK(cudaMemsetAsync(b->p, 0xFF, b->bytes, stream), st->rank);
  }
}

double UnfusedEpMoe::flops() const {
  const moe::MoeShape s{"unfused-ep", shape_.hidden, shape_.inter, shape_.experts, shape_.topk, ""};
  return moe::moe_layer_flops(s, shape_.tokens);
}

int UnfusedEpMoe::send_count(int g, int d) const {
  check_local(g, "send_count");
  XSTAGE_REQUIRE(have_routing_, "UnfusedEpMoe::send_count: set_routing has not been called");
  XSTAGE_REQUIRE(d >= 0 && d < world_, "UnfusedEpMoe::send_count: rank d = ", d, " is out of range [0, ", world_,
                 ")");
  return counts_[std::size_t(first_rank_ + g) * world_ + d];
}

int UnfusedEpMoe::recv_rows(int g) const {
  check_local(g, "recv_rows");
  return ranks_[g]->n_recv;
}

int UnfusedEpMoe::padded_rows(int g) const {
  check_local(g, "padded_rows");
  return ranks_[g]->stage.rows();
}

const std::vector<int>& UnfusedEpMoe::expert_rows(int g) const {
  check_local(g, "expert_rows");
  return ranks_[g]->stage.counts();
}

}  // namespace xstage::moe_bench
