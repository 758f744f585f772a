// CPU tests of the attention tile scheduler: every (batch, head, m_block) tile of every rank group is
// visited exactly once, by one CTA of its own group, in the order the kernel's producer and consumers
// both replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "xstage/sched/attention_scheduler.cuh"

using Sched = xstage::sched::StaticPersistentAttnScheduler;

namespace {
std::vector<Sched::WorkTileInfo> walk(const Sched::Params& p, int cta) {
  std::vector<Sched::WorkTileInfo> out;
  const Sched s(p, cta);
  for (auto w = s.get_initial_work(); w.is_valid(); w = s.get_next_work(w)) out.push_back(w);
  return out;
}

void check_exactly_once(int batch, int heads, int m_blocks, int ctas, bool longest_first, int groups) {
  SCOPED_TRACE(testing::Message() << "batch " << batch << " heads " << heads << " m_blocks " << m_blocks << " ctas "
                                  << ctas << " lf " << longest_first << " groups " << groups);
  const auto p = Sched::make_params(batch, heads, m_blocks, ctas, longest_first, groups);
  ASSERT_GE(Sched::grid_size(p), groups);
  ASSERT_LE(Sched::grid_size(p), std::max(ctas, groups));
  std::vector<int> seen(size_t(groups) * batch * heads * m_blocks, 0);
  for (int cta = 0; cta < Sched::grid_size(p); ++cta) {
    const auto tiles = walk(p, cta);
    EXPECT_GE(tiles.size(), 1u) << "a launched CTA must get work";
    for (const auto& w : tiles) {
      const auto& t = w.tile;
      ASSERT_EQ(t.group, cta / p.ctas) << "a CTA computes only its own group's tiles";
      ASSERT_GE(t.m_block, 0);
      ASSERT_LT(t.m_block, m_blocks);
      ASSERT_GE(t.head, 0);
      ASSERT_LT(t.head, heads);
      ASSERT_GE(t.batch, t.group * batch) << "a group's tiles lie in its batch range";
      ASSERT_LT(t.batch, (t.group + 1) * batch);
      ++seen[(size_t(t.batch) * heads + t.head) * m_blocks + t.m_block];
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "tile " << i;
}
}  // namespace

TEST(AttentionScheduler, EveryTileExactlyOnce) {
  for (int batch : {1, 2, 3})
    for (int heads : {1, 3, 12, 40})
      for (int m_blocks : {1, 2, 7, 64, 512})
        for (int ctas : {1, 5, 132})
          for (bool longest_first : {false, true})
            for (int groups : {1, 2, 8}) check_exactly_once(batch, heads, m_blocks, ctas, longest_first, groups);
}

TEST(AttentionScheduler, GridNeverExceedsTiles) {
  EXPECT_EQ(Sched::grid_size(Sched::make_params(1, 1, 3, 132)), 3);
  // Two groups of 3 tiles each: 3 CTAs each, not 66.
  EXPECT_EQ(Sched::grid_size(Sched::make_params(1, 1, 3, 132, false, 2)), 6);
}

TEST(AttentionScheduler, GroupsSplitTheSms) {
  // 132 SMs over 8 emulated ranks: 16 CTAs each, 128 in all (co-resident with one CTA per SM).
  const auto p = Sched::make_params(1, 24, 64, 132, false, 8);
  EXPECT_EQ(p.ctas, 16);
  EXPECT_EQ(Sched::grid_size(p), 128);
  EXPECT_EQ(Sched(p, 16).get_initial_work().tile.group, 1);
  EXPECT_EQ(Sched(p, 16).get_initial_work().tile.batch, 1);
  EXPECT_EQ(Sched(p, 127).get_initial_work().tile.group, 7);
}

TEST(AttentionScheduler, ConcurrentTilesShareHead) {
  // m_block varies fastest: the first wave of 132 CTAs covers few (batch, head) pairs, so K/V is shared in L2.
  const auto p = Sched::make_params(1, 24, 64, 132);
  EXPECT_EQ(Sched(p, 0).get_initial_work().tile.head, 0);
  EXPECT_EQ(Sched(p, 63).get_initial_work().tile.head, 0);
  EXPECT_EQ(Sched(p, 64).get_initial_work().tile.head, 1);
  EXPECT_EQ(Sched(p, 64).get_initial_work().tile.m_block, 0);
  const Sched s(p, 5);
  const auto w = s.get_next_work(s.get_initial_work());
  EXPECT_EQ(w.cursor[0], 1);  // the round
  EXPECT_EQ(w.tile.head, 2);
  EXPECT_EQ(w.tile.m_block, 9);
}

TEST(AttentionScheduler, BatchMajorDecode) {
  const auto p = Sched::make_params(2, 3, 4, 132);
  const auto w = Sched(p, 4 * 3 + 4 + 2).get_initial_work();  // batch 1, head 1, m_block 2
  EXPECT_EQ(std::make_tuple(w.tile.batch, w.tile.head, w.tile.m_block), std::make_tuple(1, 1, 2));
}

TEST(AttentionScheduler, LongestFirstIsGlobal) {
  // Causal: tiles in decreasing m_block across every (batch, head): the first round holds the longest.
  const auto p = Sched::make_params(2, 3, 10, 132, /*longest_first=*/true);
  for (int cta = 0; cta < 6; ++cta) EXPECT_EQ(Sched(p, cta).get_initial_work().tile.m_block, 9) << cta;
  EXPECT_EQ(Sched(p, 6).get_initial_work().tile.m_block, 8);
  EXPECT_EQ(Sched(p, 59).get_initial_work().tile.m_block, 0);
  // Odd rounds run in reverse: with 4 CTAs, CTA 0 takes tile 7 (the last of round 1), CTA 3 tile 4.
  const auto q = Sched::make_params(2, 3, 10, 4, true);
  const Sched s0(q, 0), s3(q, 3);
  EXPECT_EQ(s0.get_next_work(s0.get_initial_work()).tile.m_block, 8);  // tile 7: m = 9 - 7/6
  EXPECT_EQ(s0.get_next_work(s0.get_initial_work()).tile.batch, 0);
  EXPECT_EQ(s0.get_next_work(s0.get_initial_work()).tile.head, 1);     // pair 7 % 6 = 1
  EXPECT_EQ(s3.get_next_work(s3.get_initial_work()).tile.m_block, 9);  // tile 4: m 9, pair 4
  EXPECT_EQ(Sched(p, 4).get_initial_work().tile.batch, 1);
  EXPECT_EQ(Sched(p, 4).get_initial_work().tile.head, 1);
}

TEST(AttentionScheduler, LongestFirstBalancesCausalWork) {
  // Work of a causal tile ~ m_block + 1. LPT order dealt in alternating directions keeps the busiest CTA
  // within 3 % of the mean at S = 32K, H = 8 (plain round-robin: 6.3 %).
  const int m_blocks = 256, heads = 8, ctas = 132;
  const auto p = Sched::make_params(1, heads, m_blocks, ctas, true);
  double total = 0, worst = 0;
  for (int cta = 0; cta < Sched::grid_size(p); ++cta) {
    double work = 0;
    for (const auto& w : walk(p, cta)) work += w.tile.m_block + 1;
    total += work;
    worst = std::max(worst, work);
  }
  EXPECT_LT(worst / (total / Sched::grid_size(p)), 1.03);
}
