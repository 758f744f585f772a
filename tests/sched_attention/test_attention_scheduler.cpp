// CPU tests of the attention tile scheduler: every (batch, head, m_block) tile is visited exactly once,
// by one CTA, in the order the kernel's producer and consumers both replay.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "xstage/sched/attention_scheduler.cuh"

using xstage::sched::StaticPersistentAttnScheduler;
using Sched = StaticPersistentAttnScheduler;

namespace {
void check_exactly_once(int batch, int heads, int m_blocks, int ctas, bool longest_first) {
  const auto p = Sched::make_params(batch, heads, m_blocks, ctas, longest_first);
  ASSERT_GE(Sched::grid_size(p), 1);
  ASSERT_LE(Sched::grid_size(p), ctas);
  std::vector<int> seen(size_t(batch) * heads * m_blocks, 0);
  for (int cta = 0; cta < Sched::grid_size(p); ++cta) {
    int count = 0;
    for (auto w = Sched::get_initial_work(p, cta); w.is_valid; w = Sched::get_next_work(p, w)) {
      const auto c = w.coord;
      ASSERT_GE(c.m_block, 0);
      ASSERT_LT(c.m_block, m_blocks);
      ASSERT_GE(c.head, 0);
      ASSERT_LT(c.head, heads);
      ASSERT_GE(c.batch, 0);
      ASSERT_LT(c.batch, batch);
      ++seen[(size_t(c.batch) * heads + c.head) * m_blocks + c.m_block];
      ++count;
    }
    EXPECT_GE(count, 1) << "a launched CTA must get work";
  }
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "tile " << i;
}
}  // namespace

TEST(AttentionScheduler, EveryTileExactlyOnce) {
  for (int batch : {1, 2, 3})
    for (int heads : {1, 3, 12, 40})
      for (int m_blocks : {1, 2, 7, 64, 512})
        for (int ctas : {1, 5, 132})
          for (bool longest_first : {false, true}) check_exactly_once(batch, heads, m_blocks, ctas, longest_first);
}

TEST(AttentionScheduler, GridNeverExceedsTiles) {
  const auto p = Sched::make_params(1, 1, 3, 132);
  EXPECT_EQ(Sched::grid_size(p), 3);
}

TEST(AttentionScheduler, ConcurrentTilesShareHead) {
  // m_block varies fastest: the first wave of 132 CTAs covers few (batch, head) pairs, so K/V is shared in L2.
  const auto p = Sched::make_params(1, 24, 64, 132);
  EXPECT_EQ(Sched::get_initial_work(p, 0).coord.head, 0);
  EXPECT_EQ(Sched::get_initial_work(p, 63).coord.head, 0);
  EXPECT_EQ(Sched::get_initial_work(p, 64).coord.head, 1);
  EXPECT_EQ(Sched::get_initial_work(p, 64).coord.m_block, 0);
  const auto w = Sched::get_next_work(p, Sched::get_initial_work(p, 5));
  EXPECT_EQ(w.tile_idx, 137);
  EXPECT_EQ(w.coord.head, 2);
  EXPECT_EQ(w.coord.m_block, 9);
}

TEST(AttentionScheduler, BatchMajorDecode) {
  const auto p = Sched::make_params(2, 3, 4, 132);
  const auto w = Sched::get_initial_work(p, 4 * 3 + 4 + 2);  // batch 1, head 1, m_block 2
  EXPECT_EQ(std::make_tuple(w.coord.batch, w.coord.head, w.coord.m_block), std::make_tuple(1, 1, 2));
}

TEST(AttentionScheduler, LongestFirstStartsAtLastBlock) {
  const auto p = Sched::make_params(2, 3, 10, 132, /*longest_first=*/true);
  EXPECT_EQ(Sched::get_initial_work(p, 0).coord.m_block, 9);
  EXPECT_EQ(Sched::get_initial_work(p, 9).coord.m_block, 0);
  EXPECT_EQ(Sched::get_initial_work(p, 10).coord.m_block, 9);
  EXPECT_EQ(Sched::get_initial_work(p, 10).coord.head, 1);
}
