// The W4A8 in-kernel expansion's work list (include/xstage/moe/int4_expand.hpp).
#include "xstage/moe/int4_expand.hpp"

#include <cstdint>

#include "xstage/common/error.hpp"

namespace xstage::moe {

ExpandPlan make_expand_plan(int experts, int hidden, int inter) {
  XSTAGE_REQUIRE(experts >= 1, "int4 expansion: experts must be >= 1, got ", experts);
  XSTAGE_REQUIRE(hidden > 0 && hidden % 128 == 0, "int4 expansion: hidden must be a positive multiple of 128, got ", hidden);
  XSTAGE_REQUIRE(inter > 0 && inter % 128 == 0, "int4 expansion: inter must be a positive multiple of 128, got ", inter);
  ExpandPlan p;
  p.experts = experts;
  p.w1_bytes = int64_t(2) * inter * hidden / 2;
  p.w2_bytes = int64_t(hidden) * inter / 2;
  // 128 x 128 blocks: W1 holds 2 * 8192 packed bytes per block, W2 8192, so both are whole 4096-byte chunks.
  XSTAGE_REQUIRE(p.total() < (int64_t(1) << 31), "int4 expansion: ", experts, " experts of hidden ", hidden,
                 " and inter ", inter, " make ", p.total(), " chunks, more than the kernel's 32-bit counters take");
  return p;
}

}  // namespace xstage::moe
