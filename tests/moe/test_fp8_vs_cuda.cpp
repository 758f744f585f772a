// The host FP8 e4m3 and bf16 codecs (include/xstage/moe/quant.hpp) against CUDA's own conversions,
// run on the host (cuda_fp8.h / cuda_bf16.h compile for the host compiler; no GPU needed):
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3), __nv_cvt_fp8_to_halfraw and __float2bfloat16_rn.
// The device path of __nv_cvt_float_to_fp8 is cvt.rn.satfinite.e4m3x2.f32, specified to agree.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "../model/test_seed.hpp"
#include "xstage/moe/quant.hpp"

using namespace xstage::moe;

namespace {
float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
std::uint32_t to_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
}  // namespace

TEST(MoeFp8VsCuda, DecodeEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3);
    const float cuda = __half2float(__half(h));
    const float ours = fp8_e4m3_decode(std::uint8_t(c));
    if (std::isnan(cuda)) {
      EXPECT_TRUE(std::isnan(ours)) << c;
    } else {
      EXPECT_EQ(to_bits(ours), to_bits(cuda)) << c;
    }
  }
}

TEST(MoeFp8VsCuda, EncodeEqualsCudaOnEveryRoundingBoundary) {
  // Every float whose top 19 bits (sign, exponent, 10 mantissa bits) take any value, with the low 13
  // mantissa bits in a set that straddles each rounding point e4m3 can have (the rounding bit of a
  // normal result is mantissa bit 19; of a subnormal one, bits 20..23 or the implicit bit), plus
  // random bit patterns.
  long long n = 0;
  for (std::uint32_t hi = 0; hi < (1u << 19); ++hi)
    for (std::uint32_t lo : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu}) {
      const float x = from_bits((hi << 13) | lo);
      const std::uint8_t want = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
      ASSERT_EQ(fp8_e4m3_encode(x), want) << "bits " << std::hex << to_bits(x);
      ++n;
    }
  std::mt19937_64 g(test_seed());
  for (int i = 0; i < 1000000; ++i) {
    const float x = from_bits(std::uint32_t(g()));
    ASSERT_EQ(fp8_e4m3_encode(x), __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)) << "bits " << std::hex << to_bits(x);
  }
  EXPECT_EQ(n, 6LL << 19);
}

TEST(MoeBf16VsCuda, RoundEqualsCuda) {
  std::mt19937_64 g(test_seed());
  for (int i = 0; i < 1000000; ++i) {
    const float x = from_bits(std::uint32_t(g()));
    const float cuda = __bfloat162float(__float2bfloat16_rn(x));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_round(x)));
      continue;
    }
    ASSERT_EQ(to_bits(bf16_round(x)), to_bits(cuda)) << "bits " << std::hex << to_bits(x);
  }
}
