#pragma once
// The rows of a Linear-2 tile's staging slot that each epilogue warp stores (the fused MoE kernel's combine
// epilogue, src/kernels/moe/moe_kernel.cuh): contiguous ranges of row pairs (half a warp stores a row), as even a
// split over the warps as the pairs allow. Pure index math, tested on the host (tests/moe/test_epilogue_rows.cpp).
#include "xstage/common/hd.hpp"

namespace xstage::moe {

struct RowRange {
  int lo = 0, hi = 0;  // rows [lo, hi); empty when hi <= lo
};

// Warp `warp` of `warps` over the first `valid` rows of a tile: lo even, at most 2 * ceil(ceil(valid / 2) / warps)
// rows (<= 64 rows for valid <= 128 and warps >= 2, what one lane's two destination registers hold).
XSTAGE_HD inline RowRange epilogue_rows(int valid, int warp, int warps) {
  const int pairs = (valid + 1) / 2, per = (pairs + warps - 1) / warps;
  const int first = warp * per < pairs ? warp * per : pairs;
  const int end = 2 * (warp + 1) * per;
  return RowRange{2 * first, end < valid ? end : valid};
}

}  // namespace xstage::moe
