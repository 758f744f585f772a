// The FP8 tensor-core arithmetic the fused MoE kernel's W4A8 path relies on (docs/MOE-NOTEBOOK.md "Session 46"): the packed
// int4 weights expand to e4m3 subnormals (v x 2^-9), so every Linear-1 / Linear-2 product is an activation code times a
// subnormal weight code. Through the kernel's own mma_block (wgmma m64n128k32 x 4, one warpgroup, operands in shared
// memory), a normal e4m3 code times any subnormal code must come out exactly. The first tests use row-uniform
// operands (row r of A holds code a_even[r] at even k and a_odd[r] at odd k, B likewise), so output (r, n) =
// 64 (a_even b_even + a_odd b_odd), every term exact in fp32.
// Label gpu (skipped without an sm_90 GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/gpu_test.hpp"
#include "moe_kernel.cuh"
#include "xstage/moe/quant.hpp"

namespace {
namespace mk = xstage::moe_kernel;
namespace ptx = xstage::ptx;

// A [64][128] and B [128][128] logical bytes (k fastest) into shared memory in the 128 B swizzle the kernel's tensor
// maps give (16-byte chunk c of row r at chunk c ^ (r % 8)), one mma_block, the [64][128] fp32 result out.
__global__ void __launch_bounds__(128) wgmma_block_kernel(const uint8_t* ga, const uint8_t* gb, float* out) {
  __shared__ __align__(1024) uint8_t sm[64 * 128 + 128 * 128];
  uint8_t* a = sm;
  uint8_t* b = sm + 64 * 128;
  auto at = [](int r, int k) { return r * 128 + (((k / 16) ^ (r % 8)) * 16) + k % 16; };
  for (int i = threadIdx.x; i < 64 * 128; i += 128) a[at(i / 128, i % 128)] = ga[i];
  for (int i = threadIdx.x; i < 128 * 128; i += 128) b[at(i / 128, i % 128)] = gb[i];
  ptx::fence_proxy_async_shared_cta();  // the generic-proxy writes before the tensor cores read them
  __syncthreads();
  float acc[64];
  mk::mma_block(acc, a, b);
  for (int i = 0; i < 64; ++i)
    out[xstage::kernel::frag_row(i, threadIdx.x) * 128 + xstage::kernel::frag_col(i, threadIdx.x)] = acc[i];
}

using Codes = std::vector<uint8_t>;
// [64][128] outputs of one launch on A [64][128] and B [128][128] (logical, k fastest), into a NaN-poisoned buffer.
std::vector<float> run(const Codes& a, const Codes& b) {
  uint8_t* d = nullptr;
  float* out = nullptr;
  CUDA_CHECK(cudaMalloc(&d, a.size() + b.size()));
  CUDA_CHECK(cudaMalloc(&out, 64 * 128 * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d, a.data(), a.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d + a.size(), b.data(), b.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(out, 0xFF, 64 * 128 * sizeof(float)));
  wgmma_block_kernel<<<1, 128>>>(d, d + a.size(), out);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> h(64 * 128);
  CUDA_CHECK(cudaMemcpy(h.data(), out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaFree(out));
  return h;
}
// Row-uniform operands: row r of A holds a_even[r] at even k and a_odd[r] at odd k; B likewise.
std::vector<float> run(const Codes& ae, const Codes& ao, const Codes& be, const Codes& bo) {
  Codes a(64 * 128), b(128 * 128);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i % 2) ? ao[i / 128] : ae[i / 128];
  for (size_t i = 0; i < b.size(); ++i) b[i] = (i % 2) ? bo[i / 128] : be[i / 128];
  return run(a, b);
}
double dec(uint8_t c) { return double(xstage::moe::fp8_e4m3_decode(c)); }

// The 16 sign-magnitude subnormal codes s.0000.mmm (the packed int4 form's -7..7, with -0), over B's 128 rows.
Codes subnormal_b() {
  Codes b(128);
  for (int n = 0; n < 128; ++n) b[n] = uint8_t((n & 7) | ((n & 8) << 4));
  return b;
}
}  // namespace

TEST(Fp8Wgmma, NormalTimesSubnormalIsExact) {
  NEED_SM90();
  Codes a(64);
  for (int r = 0; r < 64; ++r) {  // normal codes across the range, both signs: exponent fields 1..15, mantissas
    const int e = 1 + (r * 7) % 15, m = (r * 3) % 8;
    a[r] = uint8_t((r % 2 ? 0x80 : 0) | (e << 3) | ((e == 15 && m == 7) ? 6 : m));  // never the NaN code
  }
  const Codes b = subnormal_b();
  const std::vector<float> out = run(a, a, b, b);
  int bad = 0;
  for (int r = 0; r < 64; ++r)
    for (int n = 0; n < 128; ++n) {
      const double want = 128.0 * dec(a[r]) * dec(b[n]);
      if (double(out[r * 128 + n]) != want && bad++ < 5)
        ADD_FAILURE() << "a 0x" << std::hex << int(a[r]) << " b 0x" << int(b[n]) << std::dec << ": " << out[r * 128 + n]
                      << ", expected " << want;
    }
  EXPECT_EQ(bad, 0) << "of " << 64 * 128;
}

// What the tensor cores give products of two subnormals, alone and beside a large product in one sum: printed for
// docs/MOE.md (the kernel's W4A8 differs from the two's complement form's results where activation codes are
// subnormal); asserted: every output is finite, no larger than the exact sum, and off it by at most the subnormal
// products (the normal product beside them is never lost).
TEST(Fp8Wgmma, SubnormalTimesSubnormalReport) {
  NEED_SM90();
  Codes a(64), big(64);
  for (int r = 0; r < 64; ++r) {
    a[r] = uint8_t(1 + r % 7);        // subnormal activation codes 1..7 (x 2^-9)
    big[r] = uint8_t(0x30 + r % 16);  // normal codes 0.5 .. 1.875 x 2^(..)
  }
  const Codes b = subnormal_b();
  struct Case {
    const char* what;
    Codes ae, ao;
  } cases[] = {{"subnormal x subnormal", a, a}, {"normal + subnormal x subnormal in one sum", big, a}};
  for (const Case& c : cases) {
    const std::vector<float> out = run(c.ae, c.ao, b, b);
    int exact = 0, dropped = 0, other = 0;
    for (int r = 0; r < 64; ++r)
      for (int n = 0; n < 128; ++n) {
        if ((n & 7) == 0) continue;  // zero weight: nothing to see
        const double big_part = 64.0 * dec(c.ae[r]) * dec(b[n]) * (c.ae[r] == c.ao[r] ? 0.0 : 1.0);
        const double tiny = (c.ae[r] == c.ao[r] ? 128.0 : 64.0) * dec(c.ao[r]) * dec(b[n]);
        const double want = big_part + tiny, got = out[r * 128 + n];
        ASSERT_TRUE(std::isfinite(got)) << c.what << " r " << r << " n " << n;
        ASSERT_LE(std::fabs(got), std::fabs(want) * (1 + 1e-6)) << c.what << " r " << r << " n " << n;
        // the subnormal products may be kept or flushed, but nothing else may move: |got - want| <= the tiny part
        ASSERT_LE(std::fabs(got - want), std::fabs(tiny) + 1e-6 * std::fabs(want))
            << c.what << " r " << r << " n " << n;
        if (got == want)
          ++exact;
        else if (got == big_part)
          ++dropped;
        else
          ++other;
      }
    std::printf("%s: %d exact, %d with the subnormal products dropped, %d other (of %d)\n", c.what, exact, dropped,
                other, exact + dropped + other);
  }
}

// The packed int4 form against the two's complement form's e4m3 codes on random data: A random e4m3 codes (as the
// kernel's activations: finite, all magnitudes), B random int4 values in [-7, 7] once as the normal codes e4m3(v) and
// once as the subnormals v 2^-9. Printed: how many outputs of the subnormal form, times 2^9, equal the normal form's
// bit for bit, and both forms' largest error against the exact sum (double) relative to the row's sum of |products|.
// Asserted: finite, and the subnormal form's error no larger than 4x the normal form's (plus 2^-20 relative).
TEST(Fp8Wgmma, SubnormalWeightsAgainstNormalWeights) {
  NEED_SM90();
  uint32_t x = 12345u;
  auto rnd = [&] {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    return x;
  };
  for (int trial = 0; trial < 4; ++trial) {
    Codes a(64 * 128), bn(128 * 128), bs(128 * 128);
    std::vector<int> v(128 * 128);
    for (uint8_t& c : a) {
      do c = uint8_t(rnd()); while ((c & 0x7F) == 0x7F);  // any code but NaN
      if (trial >= 2) c = xstage::moe::fp8_e4m3_encode(float(int(rnd() % 897) - 448));  // uniform(-448, 448)
    }
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = int(rnd() % 15) - 7;
      bn[i] = xstage::moe::fp8_e4m3_encode(float(v[i]));
      bs[i] = uint8_t((v[i] < 0 ? 0x80 : 0) | std::abs(v[i]));
    }
    const std::vector<float> on = run(a, bn), os = run(a, bs);
    int same = 0;
    double en = 0, es = 0;
    for (int r = 0; r < 64; ++r)
      for (int n = 0; n < 128; ++n) {
        double exact = 0, mag = 0;
        for (int k = 0; k < 128; ++k) {
          const double p = dec(a[r * 128 + k]) * v[n * 128 + k];
          exact += p;
          mag += std::fabs(p);
        }
        const double gn = on[r * 128 + n], gs = double(os[r * 128 + n]) * 512.0;
        ASSERT_TRUE(std::isfinite(gn) && std::isfinite(gs)) << r << ", " << n;
        same += gn == gs;
        if (mag > 0) {
          en = std::max(en, std::fabs(gn - exact) / mag);
          es = std::max(es, std::fabs(gs - exact) / mag);
        }
      }
    std::printf("trial %d (%s activations): %d of %d outputs equal bit for bit; max error / sum|p|: normal %.3g, "
                "subnormal %.3g\n",
                trial, trial >= 2 ? "uniform(-448, 448)" : "any-code", same, 64 * 128, en, es);
    EXPECT_LE(es, 4 * en + std::ldexp(1.0, -20)) << "trial " << trial;
  }
}

namespace {
// One warpgroup: the int4 weights' A fragments of one 64 x 128 block of the fragment layout (quant.hpp's
// pack_int4_frag) read straight from global memory (32 bytes per thread: the fused kernel's int4_frags), expanded in
// registers, then one m64n128k128 (issue_rs)
// batch in wgmma's RS form against 128 token rows x 128 K (e4m3, [token][k], into shared memory in the 128 B swizzle):
// the transposed product C^T [64 weight rows][128 tokens], in units of 2^-9.
__global__ void __launch_bounds__(128) rs_int4_kernel(const uint8_t* frag, const uint8_t* gx, float* out) {
  __shared__ __align__(1024) uint8_t b[128 * 128];
  for (int i = threadIdx.x; i < 128 * 128; i += 128) {
    const int r = i / 128, k = i % 128;
    b[r * 128 + (((k / 16) ^ (r % 8)) * 16) + k % 16] = gx[i];
  }
  ptx::fence_proxy_async_shared_cta();
  __syncthreads();
  const int t = threadIdx.x;
  uint32_t af[4][4];
  mk::int4_frags(af, frag, t);  // the fused kernel's own loads, expansion and batch (rs_mainloop's)
  float acc[64];
  mk::NoTurn free;
  mk::issue_rs(acc, af, b, free);
  ptx::wgmma_wait<0>();
  mk::fence_regs(acc);
  mk::fence_frags(af);
  for (int i = 0; i < 64; ++i)
    out[xstage::kernel::frag_row(i, t) * 128 + xstage::kernel::frag_col(i, t)] = acc[i];
}
}  // namespace

// The fragment layout end to end: a 128 x 256 int4 weight matrix packed by pack_int4_frag, its block (K block 1, row
// block 1) through rs_int4_kernel against random token codes, every output against the exact sum (double) within
// 1e-3 of the sum of |products| (the tensor cores' fp32 accumulation truncates; a misplaced value would be off by a
// whole product), into a NaN-poisoned buffer.
TEST(Fp8Wgmma, Int4FragmentsThroughRsWgmma) {
  NEED_SM90();
  const int R = 128, K = 256;
  uint32_t x = 777u;
  auto rnd = [&] {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    return x;
  };
  std::vector<int> v(R * K);
  std::vector<uint8_t> twos(R * K / 2, 0);
  for (int i = 0; i < R * K; ++i) {
    v[i] = int(rnd() % 15) - 7;
    twos[i / 2] |= uint8_t((v[i] & 0xF) << ((i & 1) * 4));
  }
  const std::vector<uint8_t> frag = xstage::moe::pack_int4_frag(twos.data(), R, K);
  Codes xs(128 * 128);  // tokens x the K block's 128 columns
  for (uint8_t& c : xs) c = xstage::moe::fp8_e4m3_encode(float(int(rnd() % 897) - 448));
  const int kb = 1, rb = 1;
  uint8_t *dfrag = nullptr, *dx = nullptr;
  float* dout = nullptr;
  CUDA_CHECK(cudaMalloc(&dfrag, 4096));
  CUDA_CHECK(cudaMalloc(&dx, xs.size()));
  CUDA_CHECK(cudaMalloc(&dout, 64 * 128 * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dfrag, frag.data() + (size_t(kb) * (R / 64) + rb) * 4096, 4096, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dx, xs.data(), xs.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout, 0xFF, 64 * 128 * sizeof(float)));
  rs_int4_kernel<<<1, 128>>>(dfrag, dx, dout);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(64 * 128);
  CUDA_CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dfrag));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dout));
  int bad = 0;
  double worst = 0;
  for (int r = 0; r < 64; ++r)
    for (int n = 0; n < 128; ++n) {
      double exact = 0, mag = 0;
      for (int k = 0; k < 128; ++k) {
        const double p = v[size_t(64 * rb + r) * K + 128 * kb + k] * dec(xs[n * 128 + k]);
        exact += p;
        mag += std::fabs(p);
      }
      const double got = double(out[r * 128 + n]) * 512.0, err = std::fabs(got - exact) / std::max(mag, 1e-30);
      worst = std::max(worst, err);
      if (!(err <= 1e-3) && bad++ < 5)
        ADD_FAILURE() << "weight row " << r << ", token " << n << ": " << got << ", exact " << exact;
    }
  std::printf("int4 fragments through the RS form: largest error %.3g of the sum of |products|\n", worst);
  EXPECT_EQ(bad, 0) << "of " << 64 * 128;
}

namespace {
// Every 32-bit word at `in` expanded by the fused kernel's int4sm_x8_to_e4m3x8: eight e4m3 codes per word, values 0-3
// from the masked word, 4-7 from it rotated.
__global__ void expand_words_kernel(const uint32_t* in, uint32_t* out, int words) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    mk::int4sm_x8_to_e4m3x8(in[i], out[2 * i], out[2 * i + 1]);
}
}  // namespace

// The int4 -> e4m3 expansion is exact: every 16-bit pattern of the packed form, in the low and in the high half of a
// 32-bit word, gives e4m3 codes whose values are the packed values (quant.hpp's int4_sm_value) times 2^-9, on the
// device into a poisoned output.
TEST(Fp8Wgmma, Int4ToE4m3Exact) {
  NEED_SM90();
  std::vector<uint16_t> in;
  for (int k = 0; k < 65536; ++k) in.push_back(uint16_t(k));  // pattern k at slot k: even k low, odd k high halves
  in.push_back(0x8001);                                       // one slot more: the same patterns, halves swapped
  for (int k = 0; k < 65536; ++k) in.push_back(uint16_t(k));
  if (in.size() % 2) in.push_back(0);
  const int words = int(in.size() / 2);
  uint32_t *din = nullptr, *dout = nullptr;
  CUDA_CHECK(cudaMalloc(&din, size_t(words) * 4));
  CUDA_CHECK(cudaMalloc(&dout, size_t(words) * 8));
  CUDA_CHECK(cudaMemcpy(din, in.data(), size_t(words) * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout, 0x7f, size_t(words) * 8));  // e4m3 NaN: a code never written shows
  expand_words_kernel<<<256, 256>>>(din, dout, words);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(size_t(words) * 8);
  CUDA_CHECK(cudaMemcpy(out.data(), dout, out.size(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(din));
  CUDA_CHECK(cudaFree(dout));
  size_t bad = 0;
  for (size_t e = 0; e < out.size(); ++e) {  // value e % 8 of word e / 8: codes 0-3 in the low word, 4-7 in the high
    uint32_t word;
    std::memcpy(&word, reinterpret_cast<const uint8_t*>(in.data()) + 4 * (e / 8), 4);
    const int v = xstage::moe::int4_sm_value(word, int(e % 8));
    const float got = xstage::moe::fp8_e4m3_decode(out[e]) * mk::kInt4SmUnit;
    if (!(got == float(v)) && bad++ < 5)
      ADD_FAILURE() << "element " << e << " (int4 " << v << "): e4m3 0x" << std::hex << int(out[e]) << std::dec
                    << " = " << got << " x 2^-9";
  }
  EXPECT_EQ(bad, 0u) << "of " << out.size() << " elements";
}
