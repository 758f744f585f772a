// The FP8 tensor-core arithmetic the fused MoE kernel's W4A8 path relies on (docs/MOE.md "Session 46"): the packed
// int4 weights expand to e4m3 subnormals (v x 2^-9), so every Linear-1 / Linear-2 product is an activation code times a
// subnormal weight code. Through the kernel's own mma_block (wgmma m64n128k32 x 4, one warpgroup, operands in shared
// memory), a normal e4m3 code times any subnormal code must come out exactly. Operands: row r of A holds code
// a_even[r] at even k and a_odd[r] at odd k, row n of B likewise (a row's 16-byte chunks are alike, so the 128 B
// swizzle does not move anything), so output (r, n) = 64 (a_even b_even + a_odd b_odd), every term exact in fp32.
// Label gpu (skipped without an sm_90 GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../common/gpu_test.hpp"
#include "moe_kernel.cuh"
#include "xstage/moe/quant.hpp"

namespace {
namespace mk = xstage::moe_kernel;
namespace ptx = xstage::ptx;

__global__ void __launch_bounds__(128) wgmma_codes_kernel(const uint8_t* a_even, const uint8_t* a_odd,
                                                          const uint8_t* b_even, const uint8_t* b_odd, float* out) {
  __shared__ __align__(1024) uint8_t sm[64 * 128 + 128 * 128];
  uint8_t* a = sm;
  uint8_t* b = sm + 64 * 128;
  for (int i = threadIdx.x; i < 64 * 128; i += 128) a[i] = (i % 2) ? a_odd[i / 128] : a_even[i / 128];
  for (int i = threadIdx.x; i < 128 * 128; i += 128) b[i] = (i % 2) ? b_odd[i / 128] : b_even[i / 128];
  ptx::fence_proxy_async_shared_cta();  // the generic-proxy writes before the tensor cores read them
  __syncthreads();
  float acc[64];
  mk::mma_block(acc, a, b);
  for (int i = 0; i < 64; ++i)
    out[xstage::kernel::frag_row(i, threadIdx.x) * 128 + xstage::kernel::frag_col(i, threadIdx.x)] = acc[i];
}

using Codes = std::vector<uint8_t>;
// [64][128] outputs of one launch, into a NaN-poisoned buffer.
std::vector<float> run(const Codes& ae, const Codes& ao, const Codes& be, const Codes& bo) {
  uint8_t* d = nullptr;
  float* out = nullptr;
  CUDA_CHECK(cudaMalloc(&d, 2 * 64 + 2 * 128));
  CUDA_CHECK(cudaMalloc(&out, 64 * 128 * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d, ae.data(), 64, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d + 64, ao.data(), 64, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d + 128, be.data(), 128, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d + 256, bo.data(), 128, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(out, 0xFF, 64 * 128 * sizeof(float)));
  wgmma_codes_kernel<<<1, 128>>>(d, d + 64, d + 128, d + 256, out);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> h(64 * 128);
  CUDA_CHECK(cudaMemcpy(h.data(), out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaFree(out));
  return h;
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
// subnormal); asserted only that every output is finite and no larger than the exact sum.
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
