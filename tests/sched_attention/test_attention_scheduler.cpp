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

void check_exactly_once(int batch, int heads, int m_blocks, int ctas, bool longest_first, int groups,
                        int lpt_group = 0) {
  SCOPED_TRACE(testing::Message() << "batch " << batch << " heads " << heads << " m_blocks " << m_blocks << " ctas "
                                  << ctas << " lf " << longest_first << " groups " << groups << " lpt_group "
                                  << lpt_group);
  const auto p = Sched::make_params(batch, heads, m_blocks, ctas, longest_first, groups, lpt_group);
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
      ASSERT_EQ(w.cursor[0], &w - tiles.data()) << "one tile per round, rounds in sequence";
      ++seen[(size_t(t.batch) * heads + t.head) * m_blocks + t.m_block];
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "tile " << i;
}

// Work of a causal tile ~ m_block + 1 (K/V blocks seen); busiest CTA over the mean.
double causal_imbalance(const Sched::Params& p) {
  double total = 0, worst = 0;
  for (int cta = 0; cta < Sched::grid_size(p); ++cta) {
    double work = 0;
    for (const auto& w : walk(p, cta)) work += w.tile.m_block + 1;
    total += work;
    worst = std::max(worst, work);
  }
  return worst / (total / Sched::grid_size(p));
}

// Mean over the first `rounds` rounds of the distinct (batch, head) pairs among the tiles running together.
double pairs_per_round(const Sched::Params& p, int rounds) {
  double sum = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<int> pairs;
    for (int cta = 0; cta < Sched::grid_size(p); ++cta) {
      const auto tiles = walk(p, cta);
      if (r < int(tiles.size())) pairs.push_back(tiles[r].tile.batch * p.heads + tiles[r].tile.head);
    }
    std::sort(pairs.begin(), pairs.end());
    sum += double(std::unique(pairs.begin(), pairs.end()) - pairs.begin());
  }
  return sum / rounds;
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

TEST(AttentionScheduler, LptGroupsEveryTileExactlyOnce) {
  // Every LPT group size (1 .. pairs, uneven last groups, groups smaller than a round so that a round
  // straddles several boundaries) with every rank-group count.
  for (int batch : {1, 2})
    for (int heads : {1, 3, 7, 24})
      for (int m_blocks : {1, 2, 7, 64, 512})
        for (int ctas : {1, 5, 132})
          for (int groups : {1, 2, 8})
            for (int g : {1, 2, 3, 5, 8, 24}) {
              if (g > batch * heads) continue;
              check_exactly_once(batch, heads, m_blocks, ctas, /*longest_first=*/true, groups, g);
              if (HasFatalFailure()) return;
            }
}

TEST(AttentionScheduler, LptGroupPairsRule) {
  constexpr long long kL2 = 60LL << 20, kMB = 1LL << 20;
  // No L2 size or no K/V bytes: one global group.
  EXPECT_EQ(Sched::lpt_group_pairs(24, 512, 132, 0, kL2, 10, 4), 24);
  EXPECT_EQ(Sched::lpt_group_pairs(24, 512, 132, 32 * kMB, 0, 10, 4), 24);
  // 24 heads x 64K, D 128 (32 MB of K/V per head, 512 m-blocks): L2 holds 1, balance needs
  // ceil(10 * 132 / 512) = 3 pairs: 8 groups of 3.
  EXPECT_EQ(Sched::lpt_group_pairs(24, 512, 132, 32 * kMB, kL2, 10, 4), 3);
  // 8 heads x 64K: 3 per group would give only 3 groups (< 4): global.
  EXPECT_EQ(Sched::lpt_group_pairs(8, 512, 132, 32 * kMB, kL2, 10, 4), 8);
  // 24 heads x 32K (16 MB, 256 m-blocks): max(3, ceil(1320 / 256) = 6) = 6 -> 4 groups of 6.
  EXPECT_EQ(Sched::lpt_group_pairs(24, 256, 132, 16 * kMB, kL2, 10, 4), 6);
  EXPECT_EQ(Sched::lpt_group_pairs(24, 256, 132, 16 * kMB, kL2, 10, 8), 24);
  // 24 heads x 16K (8 MB, 128 m-blocks): max(7, 11) = 11 -> fewer than 4 groups: global.
  EXPECT_EQ(Sched::lpt_group_pairs(24, 128, 132, 8 * kMB, kL2, 10, 4), 24);
  // Groups are evened out: 40 pairs, g = 3 -> 14 groups of at most 3.
  EXPECT_EQ(Sched::lpt_group_pairs(40, 512, 132, 32 * kMB, kL2, 10, 4), 3);
  // 26 pairs, g = 6 -> 5 groups -> 6 per group (the last 2); 25 pairs -> 5 of 5.
  EXPECT_EQ(Sched::lpt_group_pairs(25, 256, 132, 16 * kMB, kL2, 10, 4), 5);
  // make_params clamps the group to 1 .. pairs.
  EXPECT_EQ(Sched::make_params(1, 24, 512, 132, true, 1, 0).lpt_group, 24);
  EXPECT_EQ(Sched::make_params(1, 24, 512, 132, true, 1, 99).lpt_group, 24);
  EXPECT_EQ(Sched::make_params(2, 24, 512, 132, true, 1, 3).lpt_group, 3);
}

TEST(AttentionScheduler, LptGroupsKeepConcurrentPairsFew) {
  // 24 heads x 64K, D 128: global LPT runs all 24 heads together (each K/V read by ~5.5 CTAs in step);
  // groups of 3 run at most 3 (4 where a round straddles two groups).
  const auto global = Sched::make_params(1, 24, 512, 132, true);
  const auto grouped = Sched::make_params(1, 24, 512, 132, true, 1, 3);
  EXPECT_EQ(pairs_per_round(global, 40), 24.0);
  EXPECT_LE(pairs_per_round(grouped, 40), 3.5);
  // The first round holds the longest tiles of group 0 (heads 0..2), the first CTAs the longest of them.
  EXPECT_EQ(Sched(grouped, 0).get_initial_work().tile.m_block, 511);
  EXPECT_EQ(Sched(grouped, 2).get_initial_work().tile.head, 2);
  EXPECT_EQ(Sched(grouped, 3).get_initial_work().tile.m_block, 510);
  EXPECT_EQ(Sched(grouped, 131).get_initial_work().tile.m_block, 511 - 131 / 3);
}

TEST(AttentionScheduler, LptGroupBoundaryRoundsDealLongestFirst) {
  // 2 heads, 10 m-blocks, groups of 1 (10 tiles each), 4 CTAs: round 2 = tiles 8..11 straddles the
  // boundary at tile 10 (j = 2): rank 0 takes tile 10 (head 1, m 9), rank 1 tile 11 (head 1, m 8), rank 2
  // tile 8 (head 0, m 1), rank 3 tile 9 (head 0, m 0). Round 2 is even: CTA c has rank c.
  const auto p = Sched::make_params(1, 2, 10, 4, true, 1, 1);
  auto third = [&](int cta) {
    const Sched s(p, cta);
    return s.get_next_work(s.get_next_work(s.get_initial_work())).tile;
  };
  EXPECT_EQ(std::make_tuple(third(0).head, third(0).m_block), std::make_tuple(1, 9));
  EXPECT_EQ(std::make_tuple(third(1).head, third(1).m_block), std::make_tuple(1, 8));
  EXPECT_EQ(std::make_tuple(third(2).head, third(2).m_block), std::make_tuple(0, 1));
  EXPECT_EQ(std::make_tuple(third(3).head, third(3).m_block), std::make_tuple(0, 0));
}

TEST(AttentionScheduler, LptGroupsBalanceCausalWork) {
  // The groups the rule picks keep the busiest CTA within 2 % of the mean (24 heads x 64K: groups of 3;
  // 40 heads x 64K: 3) and 3.5 % (24 heads x 32K: groups of 6); global LPT 0.2-0.5 %.
  EXPECT_LT(causal_imbalance(Sched::make_params(1, 24, 512, 132, true, 1, 3)), 1.02);
  EXPECT_LT(causal_imbalance(Sched::make_params(1, 40, 512, 132, true, 1, 3)), 1.02);
  EXPECT_LT(causal_imbalance(Sched::make_params(1, 24, 256, 132, true, 1, 6)), 1.035);
  EXPECT_LT(causal_imbalance(Sched::make_params(1, 24, 512, 132, true)), 1.005);
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
