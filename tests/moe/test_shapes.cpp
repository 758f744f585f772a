// The MoE shape table (include/xstage/moe/shapes.hpp): the seven shapes of issue 11, the FLOP formula,
// and docs/MOE.md listing the same numbers.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "xstage/moe/shapes.hpp"

using namespace xstage::moe;

TEST(MoeShapes, TableIsTheIssueTable) {
  struct Want {
    const char* name;
    int h, i, e, k;
  };
  const Want want[] = {{"dit-moe-xl", 1152, 4608, 16, 2},        {"qwen3-30b-a3b", 2048, 768, 128, 8},
                       {"qwen3-235b-a22b", 4096, 1536, 128, 8},  {"deepseek-v3", 7168, 2048, 256, 8},
                       {"deepseek-v4-flash", 4096, 2048, 256, 6}, {"deepseek-v4-pro", 7168, 3072, 384, 6},
                       {"glm-flash", 4096, 2048, 288, 8}};
  ASSERT_EQ(kMoeShapes.size(), std::size(want));
  std::set<std::string_view> names;
  for (const Want& w : want) {
    const MoeShape* s = find_moe_shape(w.name);
    ASSERT_NE(s, nullptr) << w.name;
    EXPECT_EQ(s->hidden, w.h) << w.name;
    EXPECT_EQ(s->inter, w.i) << w.name;
    EXPECT_EQ(s->experts, w.e) << w.name;
    EXPECT_EQ(s->topk, w.k) << w.name;
    EXPECT_FALSE(s->source.empty()) << w.name;
    names.insert(s->name);
    // The kernel's block sizes: every dimension is a multiple of 128 (FP8 1x128 / 128x128 blocks).
    EXPECT_EQ(s->hidden % 128, 0) << w.name;
    EXPECT_EQ(s->inter % 128, 0) << w.name;
    // Expert parallelism over 1, 2, 4, 8 ranks places the experts evenly.
    for (int P : {1, 2, 4, 8}) EXPECT_EQ(s->experts % P, 0) << w.name << " P " << P;
  }
  EXPECT_EQ(names.size(), kMoeShapes.size());
  EXPECT_EQ(find_moe_shape("no-such-model"), nullptr);
}

TEST(MoeShapes, FlopsAreTwoGemms) {
  // tokens * topk * (2*h*2*inter + 2*inter*h) = 6 * tokens * topk * h * inter, by hand for one case:
  // DeepSeek-V3, 2048 tokens: 6 * 2048 * 8 * 7168 * 2048 = 1,443,109,011,456 FLOPs.
  const MoeShape& s = *find_moe_shape("deepseek-v3");
  EXPECT_DOUBLE_EQ(moe_layer_flops(s, 2048), 1443109011456.0);
  for (const MoeShape& m : kMoeShapes)
    for (long long t : {2048LL, 8192LL, 32768LL})
      EXPECT_DOUBLE_EQ(moe_layer_flops(m, t), 6.0 * t * m.topk * double(m.hidden) * m.inter) << m.name;
  EXPECT_EQ(moe_layer_flops(s, 0), 0.0);
}

TEST(MoeShapes, DocsListTheSameTable) {
  std::ifstream f(std::string(XSTAGE_SOURCE_DIR) + "/docs/MOE.md");
  ASSERT_TRUE(f) << "docs/MOE.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const MoeShape& s : kMoeShapes) {
    // One table row per shape: "| `name` | h | inter | experts | topk |".
    std::ostringstream row;
    row << "| `" << s.name << "` | " << s.hidden << " | " << s.inter << " | " << s.experts << " | " << s.topk << " |";
    EXPECT_NE(doc.find(row.str()), std::string::npos) << "docs/MOE.md lacks the row " << row.str();
  }
}
