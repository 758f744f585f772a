// The unfused baseline's all-to-all-v plan (include/xstage/moe/a2a_plan.hpp): send permutation,
// all-to-all-v and receive permutation compose to the fused layout's destination, all bijections.
#include <gtest/gtest.h>

#include <string>

#include "../model/test_seed.hpp"
#include "xstage/moe/a2a_plan.hpp"

using namespace xstage::moe;

TEST(MoeA2aPlan, ComposesToTheFusedLayout) {
  const std::uint64_t seed = test_seed();
  for (int P : {1, 2, 4, 8})
    for (RoutingKind kind : {RoutingKind::Balanced, RoutingKind::Skewed})
      for (int b_m : {1, 64}) {
        SCOPED_TRACE("P " + std::to_string(P) + " " + to_string(kind) + " b_m " + std::to_string(b_m));
        const int T = 29, k = 4, E = 16;
        const Routing r = generate_routing({P, T, E, k, kind, 1.0, seed + P});
        const DispatchPlan plan(r, make_placement(E, P), b_m);
        const A2aPlan a = make_a2a_plan(plan);
        for (int s = 0; s < P; ++s) {
          ASSERT_EQ(a.send_rows(s), T * k);
          std::vector<int> seen(T * k, 0);
          for (int t = 0; t < T; ++t)
            for (int j = 0; j < k; ++j) {
              const int row = a.send_row[(s * T + t) * k + j];
              ASSERT_GE(row, 0);
              ASSERT_LT(row, T * k);
              seen[row]++;
              const DispatchDest want = plan.dest(s, t, j);
              // The row's chunk is its destination's; all-to-all-v moves it to d's chunked buffer.
              const int off = a.send_offset[s * P + want.rank];
              ASSERT_GE(row, off);
              ASSERT_LT(row, off + a.count(s, want.rank));
              const int chunk_row = a.recv_offset[want.rank * P + s] + (row - off);
              ASSERT_EQ(a.chunk_to_recv_row[want.rank][chunk_row], want.recv_row);
            }
          for (int x : seen) ASSERT_EQ(x, 1) << "send permutation is a bijection";
        }
        for (int d = 0; d < P; ++d) {
          // Every chunked row maps to a distinct non-padding receive row, and all of them are hit.
          int real = 0;
          for (const CombineSrc& c : plan.combine_map(d)) real += c.src_rank >= 0;
          ASSERT_EQ(a.recv_rows(d), real);
          std::vector<int> hit(plan.recv_rows(d), 0);
          for (int row : a.chunk_to_recv_row[d]) {
            ASSERT_GE(row, 0);
            ASSERT_LT(row, plan.recv_rows(d));
            ASSERT_GE(plan.combine_map(d)[row].src_rank, 0);
            hit[row]++;
          }
          for (int x : hit) ASSERT_LE(x, 1);
        }
      }
}

TEST(MoeA2aPlan, CountsByHand) {
  // The hand example of test_dispatch_layout: P = 2, E = 4, T = 3, k = 2.
  const std::vector<std::int32_t> idx = {1, 2, 2, 0, 3, 1, 0, 1, 2, 3, 1, 0};
  const DispatchPlan plan(idx, 3, 2, make_placement(4, 2), 2);
  const A2aPlan a = make_a2a_plan(plan);
  // Rank 0 sends experts {0,1}: 3 rows to itself, 3 to rank 1; rank 1: 4 to rank 0, 2 to itself.
  EXPECT_EQ(a.send_counts, (std::vector<int>{3, 3, 4, 2}));
  EXPECT_EQ(a.send_offset, (std::vector<int>{0, 3, 0, 4}));
  EXPECT_EQ(a.recv_offset, (std::vector<int>{0, 3, 0, 3}));
  // Rank 0's send buffer: chunk for rank 0 = expert 0 (t1 j1), expert 1 (t0 j0, t2 j1); chunk for rank 1
  // = expert 2 (t0 j1, t1 j0), expert 3 (t2 j0).
  EXPECT_EQ(std::vector<int>(a.send_row.begin(), a.send_row.begin() + 6), (std::vector<int>{1, 3, 4, 0, 5, 2}));
}
