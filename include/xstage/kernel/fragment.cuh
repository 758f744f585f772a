#pragma once
// Register fragments of an m64nN fp32 wgmma accumulator (one warpgroup, 128 threads) and their trip to
// shared memory. Element i of thread (warp, lane) sits at row 16*warp + lane/4 + 8*((i/2)%2), column
// 8*(i/4) + 2*(lane%4) + i%2: each thread holds 2 rows, in pairs of adjacent columns.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace xstage::kernel {

__device__ __forceinline__ int frag_row(int i, int tid) { return 16 * (tid / 32) + (tid % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int frag_col(int i, int tid) { return 8 * (i / 4) + 2 * (tid % 4) + (i % 2); }

// Two floats rounded to the 16-bit type and packed in one register (low half = a).
template <class Element>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  static_assert(std::is_same_v<Element, __nv_bfloat16> || std::is_same_v<Element, __half>, "bf16 or fp16");
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// Byte offset of element (row, col) of a 64-row tile stored as 64-column panels of 64 rows x 128 B,
// 16-byte chunks XOR-swizzled by row: the layout a TMA 128 B swizzle box {64, 64} reads and writes.
__device__ __forceinline__ int sw128_offset(int row, int col, int elem_bytes) {
  const int panel = col / 64, byte = (col % 64) * elem_bytes;
  return panel * 64 * 128 + row * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16;
}

// Writes a 64 x kCols accumulator fragment (kCols/2 floats per thread) into `smem` in the sw128 panel
// layout above; conflict-free for the wgmma fragment layout.
template <class Element, int kCols>
__device__ __forceinline__ void fragment_to_smem_sw128(Element* smem, const float (&o)[kCols / 2], int tid) {
  uint8_t* base = reinterpret_cast<uint8_t*>(smem);
#pragma unroll
  for (int i = 0; i < kCols / 2; i += 2) {
    const int off = sw128_offset(frag_row(i, tid), frag_col(i, tid), int(sizeof(Element)));
    *reinterpret_cast<uint32_t*>(base + off) = pack2<Element>(o[i], o[i + 1]);
  }
}

}  // namespace xstage::kernel
