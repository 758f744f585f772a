// Host block quantizers (include/xstage/moe/quant.hpp).
#include "xstage/moe/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "xstage/common/error.hpp"

namespace xstage::moe {

Fp8Tensor quantize_fp8(const float* x, int rows, int cols, int block_rows, int block_cols) {
  XSTAGE_REQUIRE(rows >= 0 && cols >= 0, "fp8 quantization: bad shape ", rows, " x ", cols);
  XSTAGE_REQUIRE(block_rows >= 1 && block_cols >= 1, "fp8 quantization: bad block ", block_rows, " x ", block_cols);
  XSTAGE_REQUIRE(rows % block_rows == 0 && cols % block_cols == 0, "fp8 quantization: shape ", rows, " x ", cols,
                 " is not a multiple of the block ", block_rows, " x ", block_cols);
  Fp8Tensor q;
  q.rows = rows;
  q.cols = cols;
  q.block_rows = block_rows;
  q.block_cols = block_cols;
  q.code.resize(std::size_t(rows) * cols);
  q.scale.resize(std::size_t(rows / block_rows) * (cols / block_cols));
  for (int br = 0; br < rows / block_rows; ++br)
    for (int bc = 0; bc < cols / block_cols; ++bc) {
      float amax = 0;
      for (int r = br * block_rows; r < (br + 1) * block_rows; ++r)
        for (int c = bc * block_cols; c < (bc + 1) * block_cols; ++c) {
          const float v = x[std::size_t(r) * cols + c];
          XSTAGE_REQUIRE(std::isfinite(v), "fp8 quantization: element (", r, ", ", c, ") is not finite: ", v);
          amax = std::max(amax, std::fabs(v));
        }
      amax = std::max(amax, kAmaxFloor);
      const float inv = kFp8E4m3Max / amax;
      q.scale[std::size_t(br) * (cols / block_cols) + bc] = amax / kFp8E4m3Max;
      for (int r = br * block_rows; r < (br + 1) * block_rows; ++r)
        for (int c = bc * block_cols; c < (bc + 1) * block_cols; ++c)
          q.code[std::size_t(r) * cols + c] = fp8_e4m3_encode(x[std::size_t(r) * cols + c] * inv);
    }
  return q;
}

Int4Tensor quantize_int4(const float* w, int rows, int cols, int group) {
  XSTAGE_REQUIRE(rows >= 0 && cols >= 0, "int4 quantization: bad shape ", rows, " x ", cols);
  XSTAGE_REQUIRE(group >= 2 && group % 2 == 0, "int4 quantization: group must be even and >= 2, got ", group);
  XSTAGE_REQUIRE(cols % group == 0, "int4 quantization: ", cols, " columns are not a multiple of the group ", group);
  Int4Tensor q;
  q.rows = rows;
  q.cols = cols;
  q.group = group;
  q.packed.assign(std::size_t(rows) * cols / 2, 0);
  q.scale.resize(std::size_t(rows) * (cols / group));
  for (int r = 0; r < rows; ++r)
    for (int g = 0; g < cols / group; ++g) {
      const float* row = w + std::size_t(r) * cols + std::size_t(g) * group;
      float amax = 0;
      for (int i = 0; i < group; ++i) {
        XSTAGE_REQUIRE(std::isfinite(row[i]), "int4 quantization: element (", r, ", ", g * group + i, ") is not finite: ", row[i]);
        amax = std::max(amax, std::fabs(row[i]));
      }
      amax = std::max(amax, kAmaxFloor);
      const float inv = 7.0f / amax;
      q.scale[std::size_t(r) * (cols / group) + g] = amax / 7.0f;
      for (int i = 0; i < group; ++i) {
        const int v = std::clamp(int(std::nearbyint(row[i] * inv)), -8, 7);  // default rounding mode: nearest even
        const std::size_t idx = std::size_t(r) * cols + std::size_t(g) * group + i;
        q.packed[idx / 2] |= std::uint8_t((v & 0xF) << ((idx & 1) * 4));
      }
    }
  return q;
}

void pack_int4_sm(const std::uint8_t* twos, std::size_t bytes, std::uint8_t* out) {
  XSTAGE_REQUIRE(bytes % 4 == 0, "int4 packing: ", bytes, " bytes are not whole 32-bit words of eight values");
  XSTAGE_REQUIRE(bytes == 0 || (twos != nullptr && out != nullptr), "int4 packing: null buffer");
  std::uint32_t w, p;
  for (std::size_t i = 0; i < bytes; i += 4) {  // check every word first: nothing is written if one fails
    std::memcpy(&w, twos + i, 4);
    if (!int4_sm_pack_word(w, p)) {
      int j = 0;
      while (((w >> (4 * j)) & 0xFu) != 8u) ++j;
      XSTAGE_REQUIRE(false, "int4 packing: element ", 2 * i + std::size_t(j),
                     " is -8, which the sign-magnitude form cannot hold (quantize_int4 gives [-7, 7])");
    }
  }
  for (std::size_t i = 0; i < bytes; i += 4) {
    std::memcpy(&w, twos + i, 4);
    int4_sm_pack_word(w, p);
    std::memcpy(out + i, &p, 4);
  }
}

std::vector<std::uint8_t> pack_int4_frag(const std::uint8_t* twos, int rows, int K) {
  XSTAGE_REQUIRE(rows >= 0 && K >= 0 && rows % 64 == 0 && K % 128 == 0, "int4 fragment packing: ", rows, " x ", K,
                 " is not a whole number of 64 x 128 blocks");
  XSTAGE_REQUIRE(rows == 0 || K == 0 || twos != nullptr, "int4 fragment packing: null buffer");
  std::vector<std::uint32_t> words(std::size_t(rows) * K / 8, 0);
  const int row_blocks = rows / 64;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k) {
      const int v = int4_twos_at(twos, std::size_t(r) * K + k);
      XSTAGE_REQUIRE(v != -8, "int4 fragment packing: element (", r, ", ", k,
                     ") is -8, which the sign-magnitude form cannot hold (quantize_int4 gives [-7, 7])");
      const Int4FragSlot sl = int4_frag_slot(r % 64, k % 128);
      const std::size_t block = std::size_t(k / 128) * row_blocks + r / 64;
      words[block * 1024 + sl.word] |= int4_sm_bits(sl.value, v);
    }
  std::vector<std::uint8_t> out(words.size() * 4);
  if (!out.empty()) std::memcpy(out.data(), words.data(), out.size());
  return out;
}

Fp8Tensor int4_to_fp8(const Int4Tensor& w) {
  Fp8Tensor q;
  q.rows = w.rows;
  q.cols = w.cols;
  q.block_rows = 1;
  q.block_cols = w.group;
  q.code.resize(std::size_t(w.rows) * w.cols);
  for (int r = 0; r < w.rows; ++r)
    for (int c = 0; c < w.cols; ++c) q.code[std::size_t(r) * w.cols + c] = fp8_e4m3_encode(float(w.value(r, c)));
  q.scale = w.scale;
  return q;
}

}  // namespace xstage::moe
