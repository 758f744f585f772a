#pragma once
// The unfused MoE layer baseline with expert parallelism over a runtime::Team: what a user assembles from
// libraries (torch all_to_all_single with splits + per-expert cuBLASLt GEMMs) when the E experts are spread
// over P ranks, E/P per rank (rank r holds experts [r E/P, (r+1) E/P)). Library xstage_moe_unfused.
// Tested by tests/moe_gpu/test_unfused_ep_gpu.cpp (15 passing on H200s, a real NCCL team of one included; results/gpu-tests).
//
// Ranks: real (one process per GPU, NCCL 2.28: team.communicator()) or P ranks emulated on one GPU (one
// process serves all P; its all-to-alls are local device copies, NOT NVLink transfers: an emulated run says
// nothing about communication time). The data movement is xstage::moe::make_a2a_plan's (moe/a2a_plan.hpp),
// the expert math UnfusedMoe's (unfused.hpp, shared code: detail::GemmEngine / detail::ExpertStage).
//
// UnfusedEpMoe::run enqueues, on one stream, no host synchronisation (emulated: every step for every local
// rank; real: the rank's own):
//   [W4A8] int4 -> e4m3 conversion of the rank's E/P experts (every call, as UnfusedMoe);
//   1. pack: the rank's routed rows (token t, slot j) into a send buffer grouped by destination rank, then
//      local expert, then (t, j); one row = H e4m3 codes followed by the H/128 fp32 scales, padded to
//      row_bytes() = round_up(H + H/32, 16) bytes, so one transfer per peer carries both (two row gathers);
//   2. dispatch all-to-all-v: real ranks ncclGroupStart; ncclSend / ncclRecv per peer with rows (self
//      included, zero-row chunks skipped, as torch's all_to_all_single with splits); ncclGroupEnd on the
//      stream. Emulated: one cudaMemcpyAsync per (source, destination) chunk between the ranks' buffers;
//   3. on the receiver: the chunked rows gathered into expert-contiguous blocks padded to kRowAlign rows for
//      its E/P local experts (DispatchPlan's receive layout with b_m = 4); per local expert with rows the
//      Linear-1 GEMM, SwiGLU + FP8 1x128 requantisation, the Linear-2 GEMM (bf16 rows of H);
//   4. combine all-to-all-v: the bf16 rows gathered back into chunk order and sent to their source ranks
//      (the transposed counts), landing in the source's send order;
//   5. top-k weighted sum at the source: out[t] = sum_j w[t][j] * float(y(t, j)) in fp32, slot order, the
//      kernel of UnfusedMoe.
// The counts are known on the host: every rank passes the routing of ALL ranks to set_routing (as the
// fused kernel's API does). A user would first exchange the [P][E] counts with one more all-to-all and a
// host synchronisation; that exchange and the host plan are left out of the timed region on purpose, as
// for the fused kernel (its host plan is built in prepare_moe_layer).
//
// Bit-exactness: every routed row's math is UnfusedMoe's, per expert on the same rows in the same order
// (source rank, token, slot) with the same padded block size M = round_up(rows_e, 4), so the same GEMM
// call shapes as UnfusedMoe on the concatenated global batch of P*T tokens. P = 1 is UnfusedMoe bit for
// bit, and emulated P = 2, 4, 8 equal UnfusedMoe on the global batch bit for bit, PROVIDED cuBLASLt returns
// the same algorithm for the same (N, K, M) (the heuristic sees no pointers; cached per M) and the
// algorithm's rows do not depend on where the block sits in the buffer (the GPU tests check it bit for bit).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "unfused.hpp"

namespace xstage::runtime {
class Team;
}

namespace xstage::moe_bench {

// One local rank's tensors, all device pointers: x [T][H] e4m3 codes (16-byte aligned), x_scale [T][H/128],
// topk_weight [T][k], out [T][H] fp32 (16-byte aligned).
struct UnfusedRankIO {
  const std::uint8_t* x = nullptr;
  const float* x_scale = nullptr;
  const float* topk_weight = nullptr;
  float* out = nullptr;
};

class UnfusedEpMoe {
 public:
  // shape.experts = E over ALL ranks (a multiple of team.world()), shape.tokens = T tokens PER RANK.
  // UsageError naming the value for a bad shape (check_unfused_shape) or E % P != 0, before any allocation.
  // The team must outlive this object. W4A8: probes the VEC128-weights path once (UnfusedMoe's rule).
  UnfusedEpMoe(runtime::Team& team, const UnfusedShape& shape, WeightFormat format, UnfusedOptions opt = {});
  ~UnfusedEpMoe();
  UnfusedEpMoe(const UnfusedEpMoe&) = delete;
  UnfusedEpMoe& operator=(const UnfusedEpMoe&) = delete;

  // Local rank g (0 <= g < team.local_ranks()): the E/P experts of rank first_rank + g, device pointers kept
  // (not copied), layouts as UnfusedMoe::set_weights with E/P experts. Synchronises the device.
  void set_weights(int g, const std::uint8_t* w1, const float* w1_scale, const std::uint8_t* w2,
                   const float* w2_scale);

  // Host top-k indices of every rank, [(rank * T + t) * k + j] (global experts), validated per rank
  // (validate_topk: UsageError naming rank, token, slot and value). Builds the all-to-all-v plan and the
  // permutations on the host, uploads them, grows the receive-side buffers to this routing's rows. Real
  // ranks: collective (every rank calls it with the same routing; a hash of it is compared over the ranks,
  // RuntimeError if they differ). Call once per routing, outside timing. Synchronises the device.
  void set_routing(const std::int32_t* topk_index_all_host);

  // io[g] for every local rank g. Stream-ordered; real ranks: ncclSend/ncclRecv on `stream` (the host only
  // polls the non-blocking communicator until the group is enqueued).
  void run(const UnfusedRankIO* io, cudaStream_t stream);

  // Useful FLOPs of ONE rank's tokens: xstage::moe::moe_layer_flops with T tokens (padding not counted);
  // the rows are computed on whichever ranks hold their experts.
  double flops() const;

  // Tests: every intermediate buffer (packed send rows, received rows, expert rows and GEMM outputs, combine
  // rows) of every local rank filled with 0xFF bytes (NaN), stream-ordered. A row the path fails to move or
  // compute then reaches the output as NaN.
  void poison(cudaStream_t stream);

  const UnfusedShape& shape() const { return shape_; }
  WeightFormat format() const { return format_; }
  Int4Path int4_path() const;
  const std::string& int4_path_note() const;
  int world() const { return world_; }
  int first_rank() const { return first_rank_; }
  int local_ranks() const { return int(ranks_.size()); }
  int experts_per_rank() const { return shape_.experts / world_; }
  std::size_t row_bytes() const { return row_bytes_; }  // one dispatched row: codes, scales, padding

  // Introspection (valid after set_routing), for local rank g: rows it sends to rank d (all its routed rows
  // over d sum to T*k), rows it receives (unpadded), padded expert rows, routed rows per local expert.
  int send_count(int g, int d) const;
  int recv_rows(int g) const;
  int padded_rows(int g) const;
  const std::vector<int>& expert_rows(int g) const;

 private:
  struct RankState;  // one local rank's stage, buffers and tables (unfused_ep.cpp)
  enum class Direction { kDispatch, kCombine };
  void check_local(int g, const char* what) const;
  void all_to_all_v(Direction dir, cudaStream_t stream);

  runtime::Team& team_;
  UnfusedShape shape_;
  WeightFormat format_;
  int world_ = 1, first_rank_ = 0;
  std::size_t row_bytes_ = 0;
  std::unique_ptr<detail::GemmEngine> engine_;
  std::vector<std::unique_ptr<RankState>> ranks_;
  // The all-to-all-v plan of the current routing ([P][P], moe::A2aPlan): rows s sends to d, the first row of
  // d's chunk in s's send buffer, the first row of s's chunk in d's chunked receive buffer.
  std::vector<int> counts_, send_offset_, recv_offset_;
  bool have_routing_ = false;
};

}  // namespace xstage::moe_bench
