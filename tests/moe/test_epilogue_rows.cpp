// The combine epilogue's row split (moe/epilogue_rows.hpp): every valid row of a tile is stored by exactly one
// warp, each warp's range starts on a row pair and fits the two destination registers of a lane (64 rows).
#include <gtest/gtest.h>

#include <vector>

#include "xstage/moe/epilogue_rows.hpp"

namespace xstage::moe {
namespace {

TEST(MoeEpilogueRows, EveryRowOnceEvenStartsAtMost64) {
  for (int warps = 1; warps <= 4; ++warps)
    for (int valid = 0; valid <= 128; ++valid) {
      std::vector<int> owner(valid, -1);
      for (int w = 0; w < warps; ++w) {
        const RowRange r = epilogue_rows(valid, w, warps);
        if (r.hi <= r.lo) continue;
        EXPECT_EQ(r.lo % 2, 0) << "valid " << valid << " warp " << w;
        EXPECT_LE(r.hi, valid);
        if (warps >= 2) {
          EXPECT_LE(r.hi - r.lo, 64) << "valid " << valid << " warp " << w << " of " << warps;
        }
        for (int i = r.lo; i < r.hi; ++i) {
          EXPECT_EQ(owner[i], -1) << "row " << i << " twice (valid " << valid << ", " << warps << " warps)";
          owner[i] = w;
        }
      }
      for (int i = 0; i < valid; ++i) EXPECT_NE(owner[i], -1) << "row " << i << " unstored (valid " << valid << ")";
    }
}

TEST(MoeEpilogueRows, ThreeWarpsOnAFullTile) {
  EXPECT_EQ(epilogue_rows(128, 0, 3).lo, 0);
  EXPECT_EQ(epilogue_rows(128, 0, 3).hi, 44);
  EXPECT_EQ(epilogue_rows(128, 1, 3).lo, 44);
  EXPECT_EQ(epilogue_rows(128, 1, 3).hi, 88);
  EXPECT_EQ(epilogue_rows(128, 2, 3).lo, 88);
  EXPECT_EQ(epilogue_rows(128, 2, 3).hi, 128);
  const RowRange one = epilogue_rows(1, 1, 3);  // one valid row: warps 1 and 2 store nothing
  EXPECT_LE(one.hi, one.lo);
}

}  // namespace
}  // namespace xstage::moe
