// The two floors of a MoE layer call (include/xstage/moe/layer_bound.hpp): byte counts checked against the
// shapes' numbers worked out by hand, the routed-row count against a hand routing, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "xstage/common/error.hpp"
#include "xstage/moe/layer_bound.hpp"
#include "xstage/moe/routing.hpp"

using namespace xstage::moe;
using xstage::UsageError;

TEST(MoeLayerBound, ExpertBytesByHand) {
  const MoeShape& pro = *find_moe_shape("deepseek-v4-pro");  // H 7168, I 3072
  const ExpertWeightBytes f = expert_weight_bytes(pro, WeightFormat::kFp8);
  EXPECT_EQ(f.w1, 44040192u);  // 6144 x 7168
  EXPECT_EQ(f.w2, 22020096u);  // 7168 x 3072
  EXPECT_EQ(f.s1, 10752u);     // 48 x 56 blocks x 4 B
  EXPECT_EQ(f.s2, 5376u);      // 56 x 24 x 4
  EXPECT_EQ(f.total(), 66076416u);
  const ExpertWeightBytes q = expert_weight_bytes(pro, WeightFormat::kInt4);
  EXPECT_EQ(q.w1, 22020096u);
  EXPECT_EQ(q.w2, 11010048u);
  EXPECT_EQ(q.s1, 1376256u);  // 6144 rows x 56 groups x 4 B
  EXPECT_EQ(q.s2, 688128u);   // 7168 x 24 x 4
  const ExpertWeightBytes b = expert_weight_bytes(*find_moe_shape("dit-moe-xl"), WeightFormat::kBf16);
  EXPECT_EQ(b.w1, 2u * 9216 * 1152);
  EXPECT_EQ(b.w2, 2u * 1152 * 4608);
  EXPECT_EQ(b.s1 + b.s2, 0u);
}

TEST(MoeLayerBound, LayerBytesCountOnlyRoutedExperts) {
  const MoeShape& fl = *find_moe_shape("deepseek-v4-flash");  // H 4096, I 2048, k 6
  std::vector<long long> rows(64, 0);
  rows[0] = 5, rows[3] = 1, rows[63] = 700;
  const LayerBytes b = layer_min_bytes(fl, WeightFormat::kFp8, 1000, rows);
  EXPECT_EQ(b.experts_read, 3);
  EXPECT_EQ(b.weights, 3 * expert_weight_bytes(fl, WeightFormat::kFp8).total());
  EXPECT_EQ(b.input, 1000u * (4096 + 4 * 32 + 4 * 6));  // codes, 1x128 scales, top-k weights
  EXPECT_EQ(b.output, 1000u * 4096 * 4);
  EXPECT_EQ(b.total(), b.weights + b.input + b.output);
  EXPECT_EQ(b.read(), b.weights + b.input);
  const LayerBytes h = layer_min_bytes(fl, WeightFormat::kBf16, 10, rows);
  EXPECT_EQ(h.input, 10u * (2 * 4096 + 4 * 6));
  // no routed row: only the tokens (tokens routed elsewhere still come in and go out)
  const LayerBytes z = layer_min_bytes(fl, WeightFormat::kInt4, 7, std::vector<long long>(64, 0));
  EXPECT_EQ(z.weights, 0u);
  EXPECT_EQ(z.experts_read, 0);
  EXPECT_EQ(z.output, 7u * 4096 * 4);
}

TEST(MoeLayerBound, LocalRowsFromARouting) {
  // 2 ranks x 2 tokens x k 2 over 4 experts: rank 0 owns experts 0, 1; rank 1 owns 2, 3
  Routing hand;
  hand.world = 2, hand.tokens_per_rank = 2, hand.experts = 4, hand.topk = 2;
  hand.index = {0, 2, 1, 2, 3, 2, 0, 1};
  const std::vector<int> counts = expert_counts(hand);
  EXPECT_EQ(local_expert_rows(counts, 2, 0), (std::vector<long long>{2, 2}));
  EXPECT_EQ(local_expert_rows(counts, 2, 1), (std::vector<long long>{3, 1}));
  EXPECT_EQ(local_expert_rows(counts, 1, 0), (std::vector<long long>{2, 2, 3, 1}));
  // on a generated routing the local counts add up to every slot of every rank
  const Routing r = generate_routing({4, 256, 32, 4, RoutingKind::Skewed, 1.0, 7});
  long long sum = 0;
  for (int q = 0; q < 4; ++q)
    for (long long c : local_expert_rows(expert_counts(r), 4, q)) sum += c;
  EXPECT_EQ(sum, 4LL * 256 * 4);
}

TEST(MoeLayerBound, RankWorkOfARouting) {
  const MoeShape& pro = *find_moe_shape("deepseek-v4-pro");
  // P = 1: the whole layer, FLOPs as moe_layer_flops
  const Routing r1 = generate_routing({1, 512, pro.experts, pro.topk, RoutingKind::Balanced, 1.0, 3});
  const std::vector<RankWork> one = rank_work(pro, WeightFormat::kFp8, r1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].rows, 512LL * 6);
  EXPECT_DOUBLE_EQ(one[0].flops, moe_layer_flops(pro, 512));
  EXPECT_EQ(one[0].bytes.weights, std::size_t(one[0].bytes.experts_read) * 66076416u);
  // P = 4: the ranks' rows add up to every slot, each rank's bytes count its own experts and tokens
  const Routing r4 = generate_routing({4, 256, pro.experts, pro.topk, RoutingKind::Skewed, 1.0, 9});
  const std::vector<RankWork> four = rank_work(pro, WeightFormat::kInt4, r4);
  ASSERT_EQ(four.size(), 4u);
  long long rows = 0;
  for (const RankWork& k : four) {
    rows += k.rows;
    EXPECT_LE(k.bytes.experts_read, pro.experts / 4);
    EXPECT_EQ(k.bytes.output, 256u * 7168 * 4);
    EXPECT_DOUBLE_EQ(k.flops, double(k.rows) * 6 * 7168 * 3072);
  }
  EXPECT_EQ(rows, 4LL * 256 * 6);
  const Routing other = generate_routing({4, 16, 256, 6, RoutingKind::Balanced, 1.0, 9});
  EXPECT_THROW(rank_work(pro, WeightFormat::kFp8, other), UsageError);  // a routing over 256 experts, not 384
}

TEST(MoeLayerBound, Floors) {
  const LayerBound m = make_layer_bound(5.0, 6.3);
  EXPECT_TRUE(m.memory_bound());
  EXPECT_STREQ(m.bound_by(), "memory");
  EXPECT_DOUBLE_EQ(m.bound_ms(), 6.3);
  EXPECT_DOUBLE_EQ(m.fraction(9.0), 0.7);
  const LayerBound c = make_layer_bound(2.0, 1.5);
  EXPECT_FALSE(c.memory_bound());
  EXPECT_STREQ(c.bound_by(), "compute");
  EXPECT_DOUBLE_EQ(c.fraction(4.0), 0.5);
}

TEST(MoeLayerBound, Refusals) {
  const MoeShape& fl = *find_moe_shape("deepseek-v4-flash");
  const MoeShape odd{"odd", 4096, 2000, 8, 2, "test"};
  EXPECT_THROW(expert_weight_bytes(odd, WeightFormat::kFp8), UsageError);
  const std::vector<long long> rows(64, 1);
  EXPECT_THROW(layer_min_bytes(fl, WeightFormat::kFp8, -1, rows), UsageError);
  EXPECT_THROW(layer_min_bytes(fl, WeightFormat::kFp8, 8, {}), UsageError);
  EXPECT_THROW(layer_min_bytes(fl, WeightFormat::kFp8, 8, std::vector<long long>(257, 0)), UsageError);
  EXPECT_THROW(layer_min_bytes(fl, WeightFormat::kFp8, 8, {1, -2}), UsageError);
  EXPECT_THROW(local_expert_rows(std::vector<int>(6, 1), 4, 0), UsageError);  // 4 does not divide 6
  EXPECT_THROW(local_expert_rows(std::vector<int>(8, 1), 4, 4), UsageError);  // rank out of range
  Routing bad;
  bad.world = 1, bad.tokens_per_rank = 1, bad.experts = 8, bad.topk = 2;
  bad.index = {0, 8};
  EXPECT_THROW(expert_counts(bad), UsageError);  // expert id out of range
  EXPECT_THROW(make_layer_bound(0.0, 1.0), UsageError);
  EXPECT_THROW(make_layer_bound(1.0, std::numeric_limits<double>::quiet_NaN()), UsageError);
  EXPECT_THROW(make_layer_bound(1.0, 1.0).fraction(0.0), UsageError);
  try {
    layer_min_bytes(fl, WeightFormat::kFp8, 8, {1, -2});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("local expert 1 has -2 rows"), std::string::npos) << e.what();
  }
}
