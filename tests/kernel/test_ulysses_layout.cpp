// CPU tests of the Ulysses all-to-all index math (layout/ulysses.hpp) that the peer-store epilogue uses:
// every source (rank, row, head) lands at exactly one destination (rank, row, head) inside that
// destination's output, every destination element receives exactly one, and a 64-row tile's destination
// range is exactly the set of ranks its real rows map to.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "xstage/layout/ulysses.hpp"

using xstage::layout::UlyssesIn;
using xstage::layout::UlyssesOut;

TEST(UlyssesLayout, SourceToDestinationIsABijection) {
  for (int world : {1, 2, 3, 4, 8})
    for (int spr : {1, 63, 64, 100, 257})
      for (int hp : {1, 3}) {
        const UlyssesOut m{world, spr, hp};
        std::vector<int> hits(size_t(world) * spr * world * hp, 0);
        for (int s = 0; s < world; ++s)
          for (int row = 0; row < m.seqlen(); ++row)
            for (int h = 0; h < hp; ++h) {
              const int d = m.dst_rank(row), r = m.dst_row(row, d), head = m.dst_head(s, h);
              ASSERT_GE(d, 0);
              ASSERT_LT(d, world);
              ASSERT_GE(r, 0);
              ASSERT_LT(r, spr);
              ASSERT_LT(head, world * hp);
              ++hits[(size_t(d) * spr + r) * world * hp + head];
            }
        for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "world " << world << " spr " << spr << " i " << i;
      }
}

TEST(UlyssesLayout, TileDestinationRangeIsExact) {
  for (int world : {2, 4, 8})
    for (int spr : {1, 63, 64, 100, 1000}) {
      const UlyssesOut m{world, spr, 1};
      const int tiles = (m.seqlen() + 63) / 64;
      for (int t = 0; t < tiles; ++t) {
        std::set<int> want;
        for (int row = 64 * t; row < 64 * t + 64 && row < m.seqlen(); ++row) want.insert(m.dst_rank(row));
        int first, last;
        m.dst_range(64 * t, 64, &first, &last);
        std::set<int> got;
        for (int d = first; d <= last; ++d) got.insert(d);
        ASSERT_EQ(got, want) << "world " << world << " spr " << spr << " tile " << t;
      }
    }
}

TEST(UlyssesLayout, RowsOutsideADestinationAreClipped) {
  // A tile starting in rank 0's range stores to rank 1 at a negative row: rows < 0 are not rank 1's.
  const UlyssesOut m{2, 100, 1};
  EXPECT_EQ(m.dst_row(64, 1), -36);
  EXPECT_EQ(m.dst_row(64, 0), 64);
  int first, last;
  m.dst_range(192, 64, &first, &last);  // rows 192..199 are real, 200..255 padding
  EXPECT_EQ(first, 1);
  EXPECT_EQ(last, 1);
}

TEST(UlyssesLayout, PreAttentionIsTheInverseOfPostAttention) {
  // Every (source, token, head) of the pre-attention all-to-all lands once, and the post-attention map
  // sends the attention output of that (row, head) back to the same source rank, token and head.
  for (int world : {1, 2, 4, 8})
    for (int spr : {1, 100})
      for (int hp : {1, 3}) {
        const UlyssesIn in{world, spr, hp};
        const UlyssesOut out{world, spr, hp};
        std::vector<int> hits(size_t(world) * world * spr * hp, 0);
        for (int s = 0; s < world; ++s)
          for (int tok = 0; tok < spr; ++tok)
            for (int h = 0; h < world * hp; ++h) {
              const int d = in.dst_rank(h), row = in.dst_row(s, tok), hl = in.dst_head(h, d);
              ASSERT_LT(d, world);
              ASSERT_LT(hl, hp);
              ASSERT_GE(hl, 0);
              ++hits[(size_t(d) * world * spr + row) * hp + hl];
              const int back = out.dst_rank(row);
              ASSERT_EQ(back, s);
              ASSERT_EQ(out.dst_row(row, back), tok);
              ASSERT_EQ(out.dst_head(d, hl), h);
            }
        for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1);
      }
}
