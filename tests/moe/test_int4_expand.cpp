// The W4A8 in-kernel expansion's work list (moe/int4_expand.hpp): every packed byte of every local expert's W1 and
// W2 lies in exactly one chunk, chunks come in the order the schedulers need them (expert by expert, W1 before W2),
// and the byte offsets the kernel copies from and to tile the weight tensors of all local ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xstage/common/error.hpp"
#include "xstage/moe/int4_expand.hpp"
#include "xstage/moe/shapes.hpp"

namespace xstage::moe {
namespace {

void check_plan(int ranks, int experts, int hidden, int inter) {
  SCOPED_TRACE("ranks " + std::to_string(ranks) + " experts " + std::to_string(experts) + " H " +
               std::to_string(hidden) + " I " + std::to_string(inter));
  const ExpandPlan p = make_expand_plan(experts, hidden, inter);
  EXPECT_EQ(p.w1_bytes, int64_t(inter) * hidden);  // 2I rows of H/2 bytes
  EXPECT_EQ(p.w2_bytes, int64_t(hidden) * inter / 2);
  EXPECT_EQ(p.chunks(0) * kExpandChunkBytes, p.w1_bytes);
  EXPECT_EQ(p.chunks(1) * kExpandChunkBytes, p.w2_bytes);
  EXPECT_EQ(p.total(), experts * (p.chunks(0) + p.chunks(1)));
  // Chunk boundaries of the whole list, per rank: the byte ranges of each matrix tensor, in chunk units.
  const int64_t c1 = p.chunks(0), c2 = p.chunks(1);
  std::vector<int> seen1(size_t(ranks) * experts * c1, 0), seen2(size_t(ranks) * experts * c2, 0);
  for (int g = 0; g < ranks; ++g) {
    int last_expert = 0, last_matrix = 0;
    int64_t last_offset = -kExpandChunkBytes;
    for (int64_t q = 0; q < p.total(); ++q) {
      const ExpandChunk c = p.chunk(q);
      ASSERT_GE(c.expert, 0);
      ASSERT_LT(c.expert, experts);
      // List order: expert ascending; within an expert W1 then W2; offsets ascending by one chunk.
      if (c.expert == last_expert && c.matrix == last_matrix) {
        ASSERT_EQ(c.offset, last_offset + kExpandChunkBytes) << "q " << q;
      } else {
        ASSERT_EQ(c.offset, 0) << "q " << q;
        ASSERT_TRUE((c.expert == last_expert && c.matrix == 1 && last_matrix == 0) ||
                    (c.expert == last_expert + 1 && c.matrix == 0 && last_matrix == 1))
            << "q " << q << ": expert " << c.expert << " matrix " << c.matrix << " after expert " << last_expert
            << " matrix " << last_matrix;
      }
      if (c.matrix == 0 && c.offset == 0) {
        EXPECT_EQ(p.first_of(c.expert), q);
      }
      last_expert = c.expert;
      last_matrix = c.matrix;
      last_offset = c.offset;
      const int64_t b = p.byte_offset(g * experts + c.expert, c);
      ASSERT_EQ(b % kExpandChunkBytes, 0);
      std::vector<int>& seen = c.matrix == 0 ? seen1 : seen2;
      const int64_t i = b / kExpandChunkBytes;
      ASSERT_LT(i, int64_t(seen.size()));
      ++seen[size_t(i)];
    }
    EXPECT_EQ(last_expert, experts - 1);
    EXPECT_EQ(last_matrix, 1);
  }
  for (size_t i = 0; i < seen1.size(); ++i) ASSERT_EQ(seen1[i], 1) << "W1 chunk " << i;
  for (size_t i = 0; i < seen2.size(); ++i) ASSERT_EQ(seen2[i], 1) << "W2 chunk " << i;
}

TEST(MoeInt4Expand, EveryByteOnceInSchedulerOrder) {
  check_plan(1, 1, 128, 128);
  check_plan(2, 3, 256, 384);
  check_plan(4, 8, 512, 256);
  check_plan(8, 2, 1152, 128);
}

TEST(MoeInt4Expand, TableShapesFitTheCounters) {
  for (const MoeShape& s : kMoeShapes) {
    const ExpandPlan p = make_expand_plan(s.experts, s.hidden, s.inter);  // P = 1: the most chunks per rank
    EXPECT_GT(p.total(), 0);
    EXPECT_LT(p.total(), int64_t(1) << 31) << s.name;
    const ExpandChunk last = p.chunk(p.total() - 1);
    EXPECT_EQ(last.expert, s.experts - 1);
    EXPECT_EQ(last.matrix, 1);
    EXPECT_EQ(last.offset + kExpandChunkBytes, p.w2_bytes);
  }
  // DeepSeek-V3 by hand: W1 = 2 * 2048 * 7168 / 2 bytes = 3584 chunks, W2 half of that.
  const ExpandPlan v3 = make_expand_plan(256, 7168, 2048);
  EXPECT_EQ(v3.chunks(0), 3584);
  EXPECT_EQ(v3.chunks(1), 1792);
  EXPECT_EQ(v3.total(), 256 * 5376);
}

TEST(MoeInt4Expand, BadInputNamesTheValue) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([] { make_expand_plan(0, 256, 256); }).find("experts must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(msg([] { make_expand_plan(4, 200, 256); }).find("hidden must be a positive multiple of 128, got 200"),
            std::string::npos);
  EXPECT_NE(msg([] { make_expand_plan(4, 256, -128); }).find("inter must be a positive multiple of 128, got -128"),
            std::string::npos);
  EXPECT_NE(msg([] { make_expand_plan(100000, 16384, 16384); }).find("more than the kernel's 32-bit counters"),
            std::string::npos);
}

}  // namespace
}  // namespace xstage::moe
