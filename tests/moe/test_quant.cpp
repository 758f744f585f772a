// FP8 e4m3 / bf16 codecs and the block quantizers (include/xstage/moe/quant.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../model/test_seed.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/quant.hpp"
#include "../common/usage_error.hpp"

using namespace xstage::moe;
using xstage::UsageError;

namespace {
using xstage::testing::usage_error;

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// The e4m3fn value of a code from its definition, independently of the header (ldexp on fields).
double e4m3_value(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -v : v;
}

// Round-to-nearest-even with saturation by exhaustive search over the finite codes of x's sign.
std::uint8_t e4m3_brute(float x) {
  if (std::isnan(x)) return 0x7F;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(double(x));
  if (a >= 448.0) return std::uint8_t(sign | 0x7E);
  int best = 0;
  double best_d = a;  // code 0
  for (int c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(e4m3_value(c) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  return std::uint8_t(sign | best);
}

}  // namespace

TEST(MoeFp8, DecodeEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float got = fp8_e4m3_decode(std::uint8_t(c));
    const double want = e4m3_value(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      continue;
    }
    EXPECT_EQ(double(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), c >= 128) << "code " << c;  // 0x80 is -0
  }
  // Known values.
  EXPECT_EQ(fp8_e4m3_decode(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_decode(0xFE), -448.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x3C), 1.5f);
  EXPECT_EQ(fp8_e4m3_decode(0x44), 3.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x77), 240.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x78), 256.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x08), 0.015625f);      // smallest normal 2^-6
  EXPECT_EQ(fp8_e4m3_decode(0x07), 0.013671875f);   // largest subnormal 7 * 2^-9
  EXPECT_EQ(fp8_e4m3_decode(0x01), 0.001953125f);   // smallest subnormal 2^-9
  EXPECT_TRUE(std::isnan(fp8_e4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_decode(0xFF)));
  int finite = 0;
  for (int c = 0; c < 256; ++c) finite += !std::isnan(fp8_e4m3_decode(std::uint8_t(c)));
  EXPECT_EQ(finite, 254);
}

TEST(MoeFp8, EncodeRoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7F) != 0x7F) {
      EXPECT_EQ(fp8_e4m3_encode(fp8_e4m3_decode(std::uint8_t(c))), c) << "code " << c;
    }
}

TEST(MoeFp8, EncodeIsRoundToNearestEvenWithSaturation) {
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, 449.0f, 463.99f, 464.0f, 464.01f, 480.0f, 500.0f, 511.9f, 512.0f, 1e6f,
                           3.4e38f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           1e-30f, -1e-30f, 1e-45f, 0.0009765625f /* 2^-10: tie to 0 */, 0.00097657f,
                           0.0029296875f /* 1.5 * 2^-9: tie to 2 * 2^-9 */, 0.0146484375f /* 7.5 * 2^-9: to 2^-6 */};
  // Every finite value, the midpoints between neighbours and their float neighbours, both signs.
  for (int c = 0; c < 0x7E; ++c) {
    const double lo = e4m3_value(c), hi = e4m3_value(c + 1), mid = (lo + hi) / 2;
    const float m = float(mid);
    ASSERT_EQ(double(m), mid);  // midpoints are exact floats
    for (float x : {float(lo), m, std::nextafter(m, 0.0f), std::nextafter(m, 1000.0f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::mt19937_64 g(test_seed());
  for (int i = 0; i < 20000; ++i) {
    const double u = double(g() >> 11) / 9007199254740992.0;
    const float mag = float(std::ldexp(1.0, int(g() % 34) - 24) * (1 + u));  // 2^-24 .. 2^10
    xs.push_back((g() & 1) ? mag : -mag);
  }
  for (float x : xs) ASSERT_EQ(fp8_e4m3_encode(x), e4m3_brute(x)) << "x = " << x << " (bits " << std::hex << bits(x) << ")";
  EXPECT_EQ(fp8_e4m3_encode(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(fp8_e4m3_encode(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(fp8_e4m3_encode(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3_encode(1e9f), 0x7E);
  EXPECT_EQ(fp8_e4m3_encode(-1e9f), 0xFE);
  // Monotone over a fine sweep.
  float prev = -500;
  for (float x = -500; x <= 500; x += 0.0625f) {
    ASSERT_LE(fp8_e4m3_decode(fp8_e4m3_encode(prev)), fp8_e4m3_decode(fp8_e4m3_encode(x)));
    prev = x;
  }
}

TEST(MoeBf16, RoundToNearestEven) {
  EXPECT_EQ(bf16_round(1.0f), 1.0f);
  EXPECT_EQ(bf16_round(1.0f + 0x1p-8f), 1.0f);                    // tie, 1.0 is even
  EXPECT_EQ(bf16_round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);       // tie, up to even
  EXPECT_EQ(bf16_round(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);  // above the tie
  EXPECT_EQ(bf16_round(-2.5f), -2.5f);
  EXPECT_EQ(bits(bf16_round(-0.0f)), 0x80000000u);
  EXPECT_TRUE(std::isinf(bf16_round(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isinf(bf16_round(3.4028235e38f)));  // rounds past the largest bf16
  EXPECT_TRUE(std::isnan(bf16_round(std::numeric_limits<float>::quiet_NaN())));
  std::mt19937_64 g(test_seed());
  for (int i = 0; i < 10000; ++i) {
    const float x = float(std::ldexp(double(g() >> 11) / 9007199254740992.0 + 0.5, int(g() % 40) - 20));
    const float r = bf16_round(x);
    EXPECT_EQ(bits(r) & 0xFFFFu, 0u);
    EXPECT_LE(std::fabs(r - x), std::ldexp(std::fabs(x), -8)) << x;  // half an ulp of 8 significant bits
  }
}

TEST(MoeQuant, ActivationBlocksFollowTheScaleRule) {
  const int rows = 5, cols = 384;
  std::mt19937_64 g(test_seed());
  std::vector<float> x(rows * cols);
  for (float& v : x) v = float(std::ldexp(double(g() >> 11) / 9007199254740992.0 - 0.5, int(g() % 8) - 4));
  for (int i = 0; i < cols; ++i) x[2 * cols + i] = 0.0f;  // an all-zero row: amax floor
  const Fp8Tensor q = quantize_act_1x128(x.data(), rows, cols);
  ASSERT_EQ(q.scale.size(), std::size_t(rows * 3));
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < 3; ++b) {
      float amax = 0;
      for (int c = b * 128; c < (b + 1) * 128; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      const float s = q.scale[r * 3 + b];
      EXPECT_EQ(s, std::max(amax, 1e-4f) / 448.0f);
      bool saw_max = false;
      for (int c = b * 128; c < (b + 1) * 128; ++c) {
        const float v = x[r * cols + c], d = q.dequant(r, c);
        // e4m3 keeps 4 significant bits: error <= 2^-4 relative, or half a subnormal step (2^-10) x scale.
        EXPECT_LE(std::fabs(d - v), std::ldexp(std::fabs(v), -4) + std::ldexp(s, -10) + 1e-6f * std::fabs(v));
        saw_max |= (q.code[r * cols + c] & 0x7F) == 0x7E;
      }
      EXPECT_EQ(saw_max, amax > 0) << "the block's amax element encodes to +-448";
    }
  for (int c = 0; c < cols; ++c) EXPECT_EQ(q.code[2 * cols + c], 0);
}

TEST(MoeQuant, WeightBlocksAreIndependentAndScaleExactly) {
  const int N = 256, K = 256;
  std::mt19937_64 g(test_seed());
  std::vector<float> w(N * K);
  for (float& v : w) v = float(double(g() >> 11) / 9007199254740992.0 - 0.5);
  const Fp8Tensor a = quantize_weight_128x128(w.data(), N, K);
  ASSERT_EQ(a.scale.size(), 4u);
  // Scaling block (1, 0) by 4 changes only that block's scale, by exactly 4 (powers of two are exact).
  for (int n = 128; n < 256; ++n)
    for (int k = 0; k < 128; ++k) w[n * K + k] *= 4;
  const Fp8Tensor b = quantize_weight_128x128(w.data(), N, K);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(b.scale[2], 4 * a.scale[2]);
  EXPECT_EQ(b.scale[0], a.scale[0]);
  EXPECT_EQ(b.scale[1], a.scale[1]);
  EXPECT_EQ(b.scale[3], a.scale[3]);
  EXPECT_EQ(b.scale_at(200, 100), b.scale[2]);
  EXPECT_EQ(b.scale_at(100, 200), b.scale[1]);
}

TEST(MoeQuant, BadShapesAndNonFiniteInputsAreUsageErrors) {
  std::vector<float> x(256, 1.0f);
  EXPECT_NE(usage_error([&] { quantize_act_1x128(x.data(), 2, 100); }).find("not a multiple of the block 1 x 128"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { quantize_weight_128x128(x.data(), 2, 128); }).find("not a multiple of the block 128 x 128"),
            std::string::npos);
  x[130] = std::numeric_limits<float>::infinity();
  EXPECT_NE(usage_error([&] { quantize_act_1x128(x.data(), 2, 128); }).find("element (1, 2) is not finite"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { quantize_int4(x.data(), 1, 256, 128); }).find("element (0, 130) is not finite"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { quantize_int4(x.data(), 1, 200, 128); }).find("not a multiple of the group"), std::string::npos);
  EXPECT_NE(usage_error([&] { quantize_int4(x.data(), 1, 4, 3); }).find("group must be even"), std::string::npos);
}

TEST(MoeW4A8, EveryInt4ValueIsExactInE4m3) {
  for (int v = -8; v <= 7; ++v) EXPECT_EQ(fp8_e4m3_decode(fp8_e4m3_encode(float(v))), float(v)) << v;
}

TEST(MoeW4A8, HandPackedGroups) {
  // One row, four columns, groups of 2: {7, -3.5 | -7, 2.5} -> amax 7 in both groups, 7 / amax = 1:
  // q = {7, -4 (tie to even) | -7, 2 (tie to even)}, scales 1, 1.
  const std::vector<float> w = {7.0f, -3.5f, -7.0f, 2.5f};
  const Int4Tensor q = quantize_int4(w.data(), 1, 4, 2);
  EXPECT_EQ(q.packed, (std::vector<std::uint8_t>{0xC7, 0x29}));
  EXPECT_EQ(q.scale, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(q.value(0, 0), 7);
  EXPECT_EQ(q.value(0, 1), -4);
  EXPECT_EQ(q.value(0, 2), -7);
  EXPECT_EQ(q.value(0, 3), 2);
  Int4Tensor m = q;
  m.packed[0] = 0x8F;  // nibbles 0xF = -1 (low), 0x8 = -8 (high)
  EXPECT_EQ(m.value(0, 0), -1);
  EXPECT_EQ(m.value(0, 1), -8);
  const Fp8Tensor f = int4_to_fp8(m);
  EXPECT_EQ(f.dequant(0, 1), -8.0f);
  EXPECT_EQ(f.dequant(0, 0), -1.0f);
}

TEST(MoeW4A8, ConversionToFp8IsExact) {
  const int N = 64, K = 256;
  std::mt19937_64 g(test_seed());
  std::vector<float> w(N * K);
  for (float& v : w) v = float(double(g() >> 11) / 9007199254740992.0 - 0.5) * float(1 + g() % 4);
  const Int4Tensor q = quantize_int4(w.data(), N, K);
  const Fp8Tensor f = int4_to_fp8(q);
  EXPECT_EQ(f.block_rows, 1);
  EXPECT_EQ(f.block_cols, 128);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      ASSERT_GE(q.value(n, k), -8);
      ASSERT_LE(q.value(n, k), 7);
      ASSERT_EQ(bits(f.dequant(n, k)), bits(q.dequant(n, k))) << n << ", " << k;
      // int4 with scale amax / 7: error <= half a step.
      ASSERT_LE(std::fabs(q.dequant(n, k) - w[n * K + k]), 0.5f * q.scale_at(n, k) * (1 + 1e-6f));
    }
}

// The fused kernel's packed sign-magnitude int4 form (quant.hpp): every word of values in [-7, 7] round-trips, and the
// kernel's expansion (a mask, a nibble rotation and a mask; int4sm_x8_to_e4m3x8), written here on the host, gives
// e4m3 codes whose values are the integers times 2^-9 (e4m3_value above, from the format's definition).
TEST(MoeW4A8, PackedSignMagnitudeWordsExpandToScaledValues) {
  auto twos_value = [](std::uint32_t w, int j) {
    const int nib = int(w >> (4 * j)) & 0xF;
    return nib >= 8 ? nib - 16 : nib;
  };
  auto check = [&](std::uint32_t w) {
    std::uint32_t p = 0;
    bool has8 = false;
    for (int j = 0; j < 8; ++j) has8 = has8 || ((w >> (4 * j)) & 0xFu) == 8u;
    ASSERT_EQ(int4_sm_pack_word(w, p), !has8) << std::hex << w;
    if (has8) return;
    const std::uint32_t lo = p & 0x87878787u, hi = ((p >> 4) | (p << 28)) & 0x87878787u;
    for (int j = 0; j < 8; ++j) {
      ASSERT_EQ(int4_sm_value(p, j), twos_value(w, j)) << std::hex << w << " value " << j;
      const int code = int(((j < 4 ? lo : hi) >> (8 * (j & 3))) & 0xFFu);
      ASSERT_EQ(e4m3_value(code) * 512.0, double(twos_value(w, j))) << std::hex << w << " value " << j;
    }
  };
  std::mt19937_64 g(test_seed());
  for (std::uint32_t low = 0; low < 65536; ++low) {  // every low half, against a random high half and its swap
    const std::uint32_t high = std::uint32_t(g()) & 0xFFFFu;
    check(low | (high << 16));
    check(high | (low << 16));
  }
}

TEST(MoeW4A8, PackingQuantizedWeightsAndItsErrors) {
  const int N = 16, K = 256;
  std::mt19937_64 g(test_seed() + 1);
  std::vector<float> w(N * K);
  for (float& v : w) v = float(double(g() >> 11) / 9007199254740992.0 - 0.5);
  const Int4Tensor q = quantize_int4(w.data(), N, K);
  std::vector<std::uint8_t> p(q.packed.size(), 0xA5);
  pack_int4_sm(q.packed.data(), q.packed.size(), p.data());  // quantize_int4's values are in [-7, 7]
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      std::uint32_t word;
      std::memcpy(&word, p.data() + (std::size_t(n) * K + k) / 8 * 4, 4);
      ASSERT_EQ(int4_sm_value(word, k % 8), q.value(n, k)) << n << ", " << k;
    }
  std::vector<std::uint8_t> in_place = q.packed;  // out may be the input
  pack_int4_sm(in_place.data(), in_place.size(), in_place.data());
  EXPECT_EQ(in_place, p);

  std::vector<std::uint8_t> bad = q.packed;
  bad[37] = std::uint8_t((bad[37] & 0x0F) | 0x80);  // element 75 (high nibble of byte 37) is -8
  std::vector<std::uint8_t> out(bad.size(), 0xA5);
  const std::string msg = usage_error([&] { pack_int4_sm(bad.data(), bad.size(), out.data()); });
  EXPECT_NE(msg.find("element 75 is -8"), std::string::npos) << msg;
  for (std::uint8_t b : out) ASSERT_EQ(b, 0xA5);  // nothing written
  EXPECT_NE(usage_error([&] { pack_int4_sm(bad.data(), 6, out.data()); }).find("6 bytes"), std::string::npos);
}

// The register-fragment layout (quant.hpp's int4_frag_slot): a bijection of a 64 x 128 block onto its 1024 words x 8
// values whose inverse is int4_frag_element, and each thread's words hold exactly wgmma's A fragment of its k steps (rows 16 (t / 32) + (t % 32) / 4 and
// + 8, bytes [4 (t % 4), +4) and 16 on), independently restated here.
TEST(MoeW4A8, FragmentSlotsAreWgmmaFragments) {
  std::vector<int> seen(1024 * 8, 0);
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < 128; ++k) {
      const Int4FragSlot sl = int4_frag_slot(r, k);
      ASSERT_GE(sl.word, 0);
      ASSERT_LT(sl.word, 1024);
      ASSERT_GE(sl.value, 0);
      ASSERT_LT(sl.value, 8);
      ++seen[sl.word * 8 + sl.value];
      int rr = -1, kk = -1;  // the inverse the device packing uses
      int4_frag_element(sl.word, sl.value, rr, kk);
      ASSERT_EQ(rr, r) << "word " << sl.word << " value " << sl.value;
      ASSERT_EQ(kk, k) << "word " << sl.word << " value " << sl.value;
    }
  for (int i = 0; i < 1024 * 8; ++i) ASSERT_EQ(seen[i], 1) << "slot " << i;
  for (int t = 0; t < 128; ++t)
    for (int m = 0; m < 8; ++m) {  // the thread's word w[m]: k step m / 2, row half m % 2
      const int word = m < 4 ? 4 * t + m : 512 + 4 * t + (m - 4), s = m / 2;
      const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * (m % 2);
      for (int v = 0; v < 8; ++v) {  // values 0-3: fragment register lo, bytes 4 (t % 4) + v; 4-7: 16 bytes on
        const int k = 32 * s + 16 * (v / 4) + 4 * (t % 4) + v % 4;
        const Int4FragSlot sl = int4_frag_slot(row, k);
        ASSERT_EQ(sl.word, word) << "thread " << t << " word " << m << " value " << v;
        ASSERT_EQ(sl.value, v) << "thread " << t << " word " << m << " value " << v;
      }
    }
}

TEST(MoeW4A8, FragmentPackingHoldsEveryValueAndItsErrors) {
  const int R = 128, K = 256;
  std::mt19937_64 g(test_seed() + 2);
  std::vector<float> w(R * K);
  for (float& v : w) v = float(double(g() >> 11) / 9007199254740992.0 - 0.5);
  const Int4Tensor q = quantize_int4(w.data(), R, K);
  const std::vector<std::uint8_t> p = pack_int4_frag(q.packed.data(), R, K);
  ASSERT_EQ(p.size(), q.packed.size());
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < K; ++k) {
      const Int4FragSlot sl = int4_frag_slot(r % 64, k % 128);
      const std::size_t block = std::size_t(k / 128) * (R / 64) + r / 64;  // [K / 128][rows / 64]
      std::uint32_t word;
      std::memcpy(&word, p.data() + block * 4096 + 4 * std::size_t(sl.word), 4);
      ASSERT_EQ(int4_sm_value(word, sl.value), q.value(r, k)) << r << ", " << k;
    }
  std::vector<std::uint8_t> bad = q.packed;
  bad[(std::size_t(70) * K + 131) / 2] = std::uint8_t((bad[(std::size_t(70) * K + 131) / 2] & 0x0F) | 0x80);  // (70, 131)
  EXPECT_NE(usage_error([&] { pack_int4_frag(bad.data(), R, K); }).find("element (70, 131) is -8"), std::string::npos);
  EXPECT_NE(usage_error([&] { pack_int4_frag(q.packed.data(), 96, K); }).find("96 x 256"), std::string::npos);
  EXPECT_NE(usage_error([&] { pack_int4_frag(q.packed.data(), R, 200); }).find("128 x 200"), std::string::npos);
}
