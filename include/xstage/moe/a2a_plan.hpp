#pragma once
// The unfused baseline's data movement (issue 11, item 5), host side: how a user assembles the MoE
// layer from libraries. Per source rank s:
//   1. permute its routed rows into a send buffer grouped by destination rank d, then local expert,
//      then (token, slot) order;
//   2. all-to-all-v (NCCL ncclSend/ncclRecv in one group): s's chunk for d lands in d's chunked receive
//      buffer at recv_offset[d][s], chunks ordered by source;
//   3. d permutes its chunked rows into expert-contiguous blocks (the fused kernel's receive layout,
//      DispatchPlan::recv_row, padded to b_m rows) and runs one GEMM per local expert;
//   4. the way back is the inverse: expert rows -> chunks -> all-to-all-v with the transposed counts ->
//      s's send-buffer order -> combine entry (t, j) -> weighted sum.
// Everything is derived from the same DispatchPlan, so the baseline and the fused kernel agree on which
// row is which (tests/moe/test_a2a_plan.cpp composes 1-3 and checks it equals DispatchPlan::dest).
#include <vector>

#include "xstage/moe/dispatch_plan.hpp"

namespace xstage::moe {

struct A2aPlan {
  int world = 1, tokens_per_rank = 0, topk = 0;
  std::vector<int> send_counts;  // [P][P]: rows s sends to d (= rows d sends back to s)
  std::vector<int> send_offset;  // [P][P]: first row of d's chunk in s's send buffer
  std::vector<int> recv_offset;  // [P][P]: first row of s's chunk in d's chunked receive buffer
  std::vector<int> send_row;     // [P][T][k]: row of (s, t, j) in s's send buffer
  // [d][i]: the expert-contiguous receive row (DispatchPlan recv_row) of row i of d's chunked buffer.
  std::vector<std::vector<int>> chunk_to_recv_row;

  int count(int s, int d) const { return send_counts[std::size_t(s) * world + d]; }
  int send_rows(int s) const;  // rows of s's send buffer (= routed rows of s = T * k)
  int recv_rows(int d) const;  // rows of d's chunked receive buffer (unpadded)
};

A2aPlan make_a2a_plan(const DispatchPlan& plan);

}  // namespace xstage::moe
