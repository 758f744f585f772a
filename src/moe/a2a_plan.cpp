// The unfused baseline's all-to-all-v plan (include/xstage/moe/a2a_plan.hpp).
#include "xstage/moe/a2a_plan.hpp"

namespace xstage::moe {

int A2aPlan::send_rows(int s) const {
  int n = 0;
  for (int d = 0; d < world; ++d) n += count(s, d);
  return n;
}

int A2aPlan::recv_rows(int d) const {
  int n = 0;
  for (int s = 0; s < world; ++s) n += count(s, d);
  return n;
}

A2aPlan make_a2a_plan(const DispatchPlan& plan) {
  const DispatchLayout& v = plan.view();
  const ExpertPlacement& pl = plan.placement();
  const int P = plan.world(), T = plan.tokens_per_rank(), k = plan.topk();
  A2aPlan a;
  a.world = P;
  a.tokens_per_rank = T;
  a.topk = k;
  a.send_counts.assign(std::size_t(P) * P, 0);
  for (int s = 0; s < P; ++s)
    for (int e = 0; e < pl.experts; ++e) a.send_counts[std::size_t(s) * P + pl.rank_of(e)] += v.count(s, e);
  a.send_offset.assign(std::size_t(P) * P, 0);
  a.recv_offset.assign(std::size_t(P) * P, 0);
  for (int s = 0; s < P; ++s)
    for (int d = 1; d < P; ++d) a.send_offset[std::size_t(s) * P + d] = a.send_offset[std::size_t(s) * P + d - 1] + a.count(s, d - 1);
  for (int d = 0; d < P; ++d)
    for (int s = 1; s < P; ++s) a.recv_offset[std::size_t(d) * P + s] = a.recv_offset[std::size_t(d) * P + s - 1] + a.count(s - 1, d);

  // Within s's chunk for d: local expert le's rows start after d's earlier experts' rows from s.
  a.send_row.assign(std::size_t(P) * T * k, 0);
  a.chunk_to_recv_row.resize(P);
  for (int d = 0; d < P; ++d) a.chunk_to_recv_row[d].assign(std::size_t(a.recv_rows(d)), -1);
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = plan.expert(s, t, j), d = pl.rank_of(e), le = pl.local_of(e);
        int in_chunk = plan.pos_in_src(s, t, j);
        for (int l = 0; l < le; ++l) in_chunk += v.count(s, pl.global_of(d, l));
        a.send_row[(std::size_t(s) * T + t) * k + j] = a.send_offset[std::size_t(s) * P + d] + in_chunk;
        a.chunk_to_recv_row[d][std::size_t(a.recv_offset[std::size_t(d) * P + s] + in_chunk)] =
            v.dest(s, e, plan.pos_in_src(s, t, j)).recv_row;
      }
  return a;
}

}  // namespace xstage::moe
