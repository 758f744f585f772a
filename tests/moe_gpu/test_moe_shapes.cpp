// The fused layer's and the unfused baseline's shape checks, which need no device (label cpu, so CI runs them): each
// names the bad value; the constructors refuse a bad shape before any CUDA call.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "moe_layer.hpp"
#include "unfused.hpp"

namespace mb = xstage::moe_bench;
namespace mk = xstage::moe_kernel;

TEST(MoeShapes, FusedLayerNamesTheBadValue) {
  EXPECT_NE(mk::check_moe_shape({200, 256, 8, 2, 64}, 1).find("hidden = 200"), std::string::npos);
  EXPECT_NE(mk::check_moe_shape({256, 256, 12, 2, 64}, 8).find("experts = 12"), std::string::npos);
  EXPECT_NE(mk::check_moe_shape({256, 256, 8, 9, 64}, 1).find("topk = 9"), std::string::npos);
  EXPECT_NE(mk::check_moe_shape({256, 256, 8, 2, 64}, 9).find("world size 9"), std::string::npos);
  EXPECT_EQ(mk::check_moe_shape({256, 256, 8, 2, 64}, 8), "");
  // the kernel's tile fields, refused where the layer is made (they were refused only at the first call)
  EXPECT_NE(mk::check_moe_shape({256, 256, 4096, 2, 64}, 1).find("experts = 4096 over 1 ranks is 4096 per rank; at most "
                                                                    "2047"), std::string::npos);
  EXPECT_EQ(mk::check_moe_shape({256, 256, 4094, 2, 64}, 2), "");
  EXPECT_NE(mk::check_moe_shape({131072, 256, 8, 2, 64}, 1).find("hidden = 131072 and inter = 256 must be below"),
            std::string::npos) << mk::check_moe_shape({131072, 256, 8, 2, 64}, 1);
  EXPECT_NE(mk::check_moe_shape({256, 131072, 8, 2, 64}, 1).find("inter = 131072"), std::string::npos);
  // DeepSeek-V4-Pro at 32768 tokens per rank over 2 ranks: 417600 receive rows of 7168 bytes (past 2^31 bytes; byte
  // offsets are 64-bit), but the rows fit a TMA coordinate. 8 folded copies of 2^28 rows do not.
  EXPECT_EQ(mk::check_moe_shape({7168, 3072, 384, 6, 32768}, 2), "");
  EXPECT_NE(mk::check_moe_shape({256, 256, 64, 8, 1 << 22}, 8).find("exceeds the 2^31 rows"), std::string::npos)
      << mk::check_moe_shape({256, 256, 64, 8, 1 << 22}, 8);
}

TEST(MoeShapes, UnfusedBaselineNamesTheBadValue) {
  EXPECT_NE(mb::check_unfused_shape({200, 256, 8, 2, 64}).find("hidden = 200"), std::string::npos);
  EXPECT_NE(mb::check_unfused_shape({256, 100, 8, 2, 64}).find("inter = 100"), std::string::npos);
  EXPECT_NE(mb::check_unfused_shape({256, 256, 0, 1, 64}).find("experts = 0"), std::string::npos);
  EXPECT_NE(mb::check_unfused_shape({256, 256, 8, 9, 64}).find("topk = 9"), std::string::npos);
  EXPECT_NE(mb::check_unfused_shape({256, 256, 8, 0, 64}).find("topk = 0"), std::string::npos);
  EXPECT_NE(mb::check_unfused_shape({256, 256, 8, 2, 0}).find("tokens = 0"), std::string::npos);
  EXPECT_EQ(mb::check_unfused_shape({256, 256, 8, 2, 64}), "");
  EXPECT_THROW(mb::UnfusedMoe({200, 256, 8, 2, 64}, mb::WeightFormat::kFp8), std::invalid_argument);
  EXPECT_THROW(mb::UnfusedMoe({256, 256, 8, 9, 64}, mb::WeightFormat::kInt4), std::invalid_argument);
  EXPECT_THROW(mb::CeilingGemm({256, 384 + 1, 8, 2, 64}), std::invalid_argument);
  try {
    mb::UnfusedMoe moe({256, 256, 8, 2, -1}, mb::WeightFormat::kFp8);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tokens = -1"), std::string::npos) << e.what();
  }
}
