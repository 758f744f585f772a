#pragma once
// The work list of the W4A8 int4 -> e4m3 expansion inside the fused MoE kernel (MoeLayerParams::int4_expand,
// src/kernels/moe/moe_kernel.cuh, "W4A8: the expansion inside the kernel"). One rank's packed int4 weights are cut
// into chunks of kExpandChunkBytes, listed in the order the tile schedulers first need them: local expert 0's W1,
// its W2, expert 1's W1, its W2, ... (both orders walk the experts' rows in expert order and an expert's Linear-2
// tiles come after its Linear-1 tiles). Idle warps claim chunks from one counter per rank in list order; a matrix
// is ready once all of its chunks are written. Pure index math, tested on the host (tests/moe/test_int4_expand.cpp).
#include <cstdint>

#include "xstage/common/hd.hpp"

namespace xstage::moe {

// Packed int4 bytes per chunk (8192 weights; 8 KB of e4m3 codes out): 16 bytes per lane of a warp, 8 times.
inline constexpr int kExpandChunkBytes = 4096;

struct ExpandChunk {
  int expert = 0;           // local expert
  int matrix = 0;           // 0: W1 ([2I][H]), 1: W2 ([H][I])
  int64_t offset = 0;       // packed bytes into that expert's matrix (the e4m3 copy: twice this)
};

struct ExpandPlan {
  int experts = 0;                       // local experts of one rank
  int64_t w1_bytes = 0, w2_bytes = 0;    // packed bytes of one expert's W1 (2I * H / 2) and W2 (H * I / 2)

  XSTAGE_HD int64_t chunks(int matrix) const { return (matrix != 0 ? w2_bytes : w1_bytes) / kExpandChunkBytes; }
  XSTAGE_HD int64_t per_expert() const { return chunks(0) + chunks(1); }
  XSTAGE_HD int64_t total() const { return int64_t(experts) * per_expert(); }
  XSTAGE_HD int64_t first_of(int expert) const { return int64_t(expert) * per_expert(); }  // its W1's first chunk
  // Chunk q (0 <= q < total()) of the list. 32-bit division: make_expand_plan keeps total() below 2^31 (a 64-bit
  // division is a register-hungry subroutine in the kernel's epilogue warps).
  XSTAGE_HD ExpandChunk chunk(int64_t q) const {
    ExpandChunk c;
    const int pe = int(per_expert()), c1 = int(chunks(0));
    c.expert = int(q) / pe;
    const int r = int(q) - c.expert * pe;
    c.matrix = r >= c1 ? 1 : 0;
    c.offset = int64_t(c.matrix != 0 ? r - c1 : r) * kExpandChunkBytes;
    return c;
  }
  // Packed byte of chunk c's first weight in its matrix tensor (W1 [E'][2I][H/2] or W2 [E'][H][I/2] bytes over the
  // local ranks' experts), for expert index `expert_index` there (local rank g, local expert e: g * experts + e);
  // the chunk's e4m3 codes start at twice this in the e4m3 copy.
  XSTAGE_HD int64_t byte_offset(int expert_index, const ExpandChunk& c) const {
    return int64_t(expert_index) * (c.matrix != 0 ? w2_bytes : w1_bytes) + c.offset;
  }
};

// The plan of a layer with `experts` local experts; hidden and inter must be positive multiples of 128 (the FP8
// block: then both matrices are whole chunks), experts >= 1, and the list must fit the kernel's 32-bit counters.
// Throws UsageError naming the bad value.
ExpandPlan make_expand_plan(int experts, int hidden, int inter);

}  // namespace xstage::moe
