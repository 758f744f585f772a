#pragma once
// Number formats of the MoE layer (issue 11) and their host reference quantizers.
//
// FP8 E4M3 ("e4m3fn", the OCP/NVIDIA format of cvt.rn.satfinite.e4m3x2.f32): 1 sign, 4 exponent bits
// (bias 7), 3 mantissa bits, no infinities; S.1111.111 is NaN, so the largest finite value is
// S.1111.110 = 448. Subnormals: exponent field 0, value m * 2^-9. Encoding rounds to nearest even and
// saturates (|x| > 448 -> 448, +-inf -> +-448); NaN -> 0x7F; the sign of zero is kept. Encode and
// decode are XSTAGE_HD (pure bit arithmetic), equal to CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE,
// __NV_E4M3) (tests/moe/test_fp8_vs_cuda.cpp checks that where the toolkit is present).
//
// BF16: the top 16 bits of an IEEE float after round-to-nearest-even (NaN stays a quiet NaN).
//
// Block scales (DeepGEMM's convention, fp32 scales): for each block B of a tensor,
//   amax = max(max_{x in B} |x|, 1e-4),  code(x) = e4m3(x * (448 / amax)),  scale = amax / 448,
// so x ~ decode(code) * scale. Activations: 1 x 128 blocks (per token, 128 consecutive channels of
// K); weights [N][K] (N outputs, K reduced): 128 x 128 blocks.
//
// W4A8 weights: int4 codes q in [-8, 7] (two's complement, two per byte, element k in the low nibble
// when k is even) with one fp32 scale per (row n, group of 128 along K):
//   amax = max(max |w|, 1e-4),  q = clamp(rne(w * (7 / amax)), -8, 7),  scale = amax / 7.
// Every integer in [-8, 7] is exactly an e4m3 value (|q| <= 8 needs 4 significant bits, e4m3 has 4),
// so the in-kernel conversion int4 -> e4m3 is exact and the group scale becomes the weight block
// scale of the FP8 path with block 1 x 128 instead of 128 x 128 (int4_to_fp8): the per-block
// promotion multiplies each 128-deep partial sum by a_scale[m][kb] * w_scale[n][kb] either way.
// (|w| <= amax, so q is in [-7, 7]: the fused kernel's packed form below holds exactly these.)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "xstage/common/hd.hpp"

namespace xstage::moe {

inline constexpr float kFp8E4m3Max = 448.0f;
inline constexpr int kQuantBlock = 128;  // 1x128 activation blocks, 128x128 weight blocks, W4A8 groups
inline constexpr float kAmaxFloor = 1e-4f;

namespace detail {
XSTAGE_HD inline std::uint32_t f32_bits(float x) {
  std::uint32_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}
XSTAGE_HD inline float f32_from(std::uint32_t b) {
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}
}  // namespace detail

XSTAGE_HD inline float fp8_e4m3_decode(std::uint8_t code) {
  const std::uint32_t sign = std::uint32_t(code >> 7) << 31;
  const std::uint32_t e = (code >> 3) & 0xF, m = code & 0x7;
  if (e == 0xF && m == 0x7) return detail::f32_from(0x7FC00000u | sign);  // NaN
  if (e == 0) {                                                           // zero, subnormal: m * 2^-9
    const float v = float(m) * (1.0f / 512.0f);
    return sign ? -v : v;
  }
  return detail::f32_from(sign | ((e - 7 + 127) << 23) | (m << 20));
}

XSTAGE_HD inline std::uint8_t fp8_e4m3_encode(float x) {
  const std::uint32_t bits = detail::f32_bits(x);
  const std::uint32_t a = bits & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;  // NaN
  const std::uint8_t sign = std::uint8_t((bits >> 31) << 7);
  const int fe = int(a >> 23) - 127;  // unbiased float exponent (-127 for zero and float subnormals)
  std::uint32_t res;
  if (fe > 8) {
    res = 0x7E;  // >= 512 (and inf): saturate
  } else if (fe >= -6) {
    // Normal e4m3: exponent field fe + 7 in 1..15, keep 3 of 23 mantissa bits, round to nearest even;
    // a carry out of the mantissa correctly bumps the exponent.
    const std::uint32_t m23 = a & 0x7FFFFFu, keep = m23 >> 20, rem = m23 & 0xFFFFFu;
    res = (std::uint32_t(fe + 7) << 3) | keep;
    if (rem > 0x80000u || (rem == 0x80000u && (keep & 1u))) ++res;
    if (res > 0x7E) res = 0x7E;  // 464 <= |x| < 512 rounds past 448 (or onto the NaN pattern): saturate
  } else if (fe >= -10) {
    // Subnormal e4m3 (and the rounding up to the smallest normal): in units of 2^-9 the value is
    // sig * 2^(fe - 14) with the 24-bit significand sig; the result code equals that integer (8 = 0x08
    // is the smallest normal 2^-6).
    const std::uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
    const int sh = 14 - fe;  // 21 .. 24
    const std::uint32_t keep = sig >> sh, rem = sig & ((1u << sh) - 1u), half = 1u << (sh - 1);
    res = keep;
    if (rem > half || (rem == half && (keep & 1u))) ++res;
  } else {
    res = 0;  // |x| < 2^-10 (half the smallest subnormal) rounds to zero
  }
  return std::uint8_t(res | sign);
}

XSTAGE_HD inline float bf16_round(float x) {
  const std::uint32_t b = detail::f32_bits(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return detail::f32_from((b | 0x00400000u) & 0xFFFF0000u);  // quiet NaN
  const std::uint32_t r = b + 0x7FFFu + ((b >> 16) & 1u);
  return detail::f32_from(r & 0xFFFF0000u);
}

// A block-scaled FP8 tensor [rows][cols], row-major; scale[(r / block_rows) * (cols / block_cols) + c / block_cols].
struct Fp8Tensor {
  int rows = 0, cols = 0;
  int block_rows = 1, block_cols = kQuantBlock;
  std::vector<std::uint8_t> code;
  std::vector<float> scale;

  int scale_cols() const { return cols / block_cols; }
  float scale_at(int r, int c) const { return scale[std::size_t(r / block_rows) * scale_cols() + c / block_cols]; }
  float dequant(int r, int c) const { return fp8_e4m3_decode(code[std::size_t(r) * cols + c]) * scale_at(r, c); }
};

// The DeepGEMM block quantizer above for any block shape; rows % block_rows == 0 and
// cols % block_cols == 0 are required (UsageError), as are finite inputs (UsageError naming row, col).
Fp8Tensor quantize_fp8(const float* x, int rows, int cols, int block_rows, int block_cols);
inline Fp8Tensor quantize_act_1x128(const float* x, int rows, int cols) { return quantize_fp8(x, rows, cols, 1, kQuantBlock); }
inline Fp8Tensor quantize_weight_128x128(const float* w, int rows, int cols) {
  return quantize_fp8(w, rows, cols, kQuantBlock, kQuantBlock);
}

// Element i of two's complement int4 bytes (two per byte, even i in the low nibble), in [-8, 7].
XSTAGE_HD inline int int4_twos_at(const std::uint8_t* bytes, std::size_t i) {
  const int nib = (bytes[i / 2] >> ((i & 1) * 4)) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}

// W4A8 weights [rows][cols] (format above); cols % group == 0 and cols even are required.
struct Int4Tensor {
  int rows = 0, cols = 0, group = kQuantBlock;
  std::vector<std::uint8_t> packed;  // rows * cols / 2 bytes
  std::vector<float> scale;          // [rows][cols / group]

  int value(int r, int c) const { return int4_twos_at(packed.data(), std::size_t(r) * cols + c); }
  float scale_at(int r, int c) const { return scale[std::size_t(r) * (cols / group) + c / group]; }
  float dequant(int r, int c) const { return float(value(r, c)) * scale_at(r, c); }
};

Int4Tensor quantize_int4(const float* w, int rows, int cols, int group = kQuantBlock);

// The fused kernel's packed int4 form (MoeWeightFormat::kInt4 inputs; docs/MOE-NOTEBOOK.md "Session 46"): the same values,
// stored as sign and magnitude, so in [-7, 7] (two's complement's -8 has no code; quantize_int4 never gives it, its
// scale is amax / 7). Each little-endian 32-bit word holds the eight values v0..v7 of the two's complement form's
// same four bytes (elements 8j .. 8j + 7 of a row) so that a mask and a rotation by one nibble put every value's
// sign and magnitude into bits 7 and 0-2 of an e4m3 byte, the subnormal (-1)^s |v| 2^-9 (the kernel's
// int4sm_x8_to_e4m3x8; the 2^9 goes back into the promotion's scale). Byte i (0-3) of the word:
//   bit 7: sign of v_i;  bits 0-2: |v_i|;  bits 4-6: |v_{4+i}|;  bit 3: sign of v_{4 + (i + 3) % 4}.
// A zero's sign bit may be either (the code is then -0, the same product).
XSTAGE_HD inline int int4_sm_value(std::uint32_t w, int i) {  // value i (0-7) of a packed word
  const int byte = i & 3;
  const int mag = int(w >> (8 * byte + (i < 4 ? 0 : 4))) & 7;
  const bool neg = i < 4 ? ((w >> (8 * byte + 7)) & 1u) : ((w >> (8 * ((byte + 1) & 3) + 3)) & 1u);
  return neg ? -mag : mag;
}
// The bits of value v (in [-7, 7]) as value i (0-7) of a packed word.
XSTAGE_HD inline std::uint32_t int4_sm_bits(int i, int v) {
  const std::uint32_t neg = v < 0 ? 1u : 0u, mag = std::uint32_t(v < 0 ? -v : v);
  const int byte = i & 3;
  return i < 4 ? (neg << (8 * byte + 7)) | (mag << (8 * byte))
               : (mag << (8 * byte + 4)) | (neg << (8 * ((byte + 1) & 3) + 3));
}
// Packs one word of eight two's complement values (value j in nibble j). False (out unchanged) if one is -8.
XSTAGE_HD inline bool int4_sm_pack_word(std::uint32_t twos, std::uint32_t& out) {
  std::uint32_t w = 0;
  for (int j = 0; j < 8; ++j) {
    const int nib = int(twos >> (4 * j)) & 0xF;
    if (nib == 8) return false;
    w |= int4_sm_bits(j, nib >= 8 ? nib - 16 : nib);
  }
  out = w;
  return true;
}
// Host packing of `bytes` bytes of the two's complement form (bytes % 4 == 0) into `out` (may equal `twos`). A -8
// is a UsageError naming its element index, and nothing is written then.
void pack_int4_sm(const std::uint8_t* twos, std::size_t bytes, std::uint8_t* out);

// The register-fragment layout of int4 weights for wgmma's RS form, where the weights are the A operand and expand in
// registers (docs/MOE-NOTEBOOK.md "Session 46" item 9, "Session 47": the fused kernel's W4A8 weights, pack_int4_weights).
// Blocks of 64 weight rows x 128 K (4 KB), each the A operand of one m64 batch over one K block. Thread t (0-127) of
// the warpgroup reads words [4 t, 4 t + 4) and [512 + 4 t, +4) of its block, w[0..7]; word w[2 s + h] holds, in the
// packed sign-magnitude form above, k step s's values of row 16 (t / 32) + (t % 32) / 4 + 8 h: values 0-3 its bytes
// [4 (t % 4), +4) of the step, values 4-7 the same 16 bytes on; int4sm_x8_to_e4m3x8 turns it into fragment registers h
// (lo) and 2 + h (hi) of step s, the layout wgmma's A fragment has (moe_kernel's WgmmaFp8::rs).
struct Int4FragSlot {
  int word;   // 32-bit word within the 4 KB block, 0-1023
  int value;  // value within the word, 0-7
};
XSTAGE_HD inline Int4FragSlot int4_frag_slot(int r, int k) {  // r in [0, 64), k in [0, 128)
  const int s = k / 32, kk = k % 32, tig = (kk % 16) / 4;
  const int g = r % 8, h = (r % 16) / 8, t = 32 * (r / 16) + 4 * g + tig, m = 2 * s + h;
  return {m < 4 ? 4 * t + m : 512 + 4 * t + (m - 4), 4 * (kk / 16) + kk % 4};
}
// The inverse: the element (r, k) of the block that value `value` of word `word` holds.
XSTAGE_HD inline void int4_frag_element(int word, int value, int& r, int& k) {
  const int t = (word % 512) / 4, m = (word / 512) * 4 + word % 4, s = m / 2, h = m % 2;
  r = 16 * (t / 32) + (t % 32) / 4 + 8 * h;
  k = 32 * s + 16 * (value / 4) + 4 * (t % 4) + value % 4;
}
// Packs [rows][K] two's complement int4 (quantize_int4's bytes: two per byte, even k in the low nibble; rows % 64 ==
// 0, K % 128 == 0) into the fragment layout: 4 KB blocks in [K / 128][rows / 64] order (a K block's row blocks
// adjacent). A -8 is a UsageError naming its element (row, k); a bad shape one naming the shape.
std::vector<std::uint8_t> pack_int4_frag(const std::uint8_t* twos, int rows, int K);
// The exact FP8 form of int4 weights the kernel computes with: code = e4m3(q), block 1 x group, the group
// scales as block scales. dequant() of the result equals the int4 tensor's dequant() bit for bit.
Fp8Tensor int4_to_fp8(const Int4Tensor& w);

}  // namespace xstage::moe
