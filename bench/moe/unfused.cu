// The CUDA kernels of the unfused MoE baseline (declarations and layouts: unfused_kernels.hpp; the
// host side, cuBLASLt included: unfused.cpp; the expert-parallel host side: unfused_ep.cpp). Simple
// memory-bound kernels, one instantiation each (the row gather: 16-byte and 4-byte words).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "unfused_kernels.hpp"
#include "xstage/common/hash.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/ptx/tma.cuh"

namespace xstage::moe_bench::detail {
namespace ptx = ::xstage::ptx;
namespace {

constexpr int kBlock = 128;  // the quantisation block (1x128 / 128x128)

__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t b) { return __uint_as_float(std::uint32_t(b) << 16); }

__device__ __forceinline__ std::uint32_t nibble_code(std::uint32_t v, std::uint64_t lo, std::uint64_t hi) {
  return std::uint32_t(((v < 8 ? lo : hi) >> (8 * (v & 7))) & 0xFFu);
}

// Scale slot of (row p, K block kb) in the padded VEC128 layout of unfused_kernels.hpp.
__device__ __forceinline__ std::int64_t vec128_slot(const int* row_expert, const int* expert_off, int p, int kb,
                                                    int kblocks) {
  const int e = row_expert[p];
  const int off = expert_off[e], rows_e = expert_off[e + 1] - off;
  return std::int64_t(off) * kblocks + std::int64_t(kb) * rows_e + (p - off);
}

// One block per padded row.
__global__ void __launch_bounds__(128) permute_kernel(const std::uint8_t* __restrict__ src, std::int64_t src_stride,
                                                      const float* __restrict__ src_scale, std::int64_t scale_stride,
                                                      int hidden, const int* __restrict__ row_src,
                                                      const int* __restrict__ row_expert,
                                                      const int* __restrict__ expert_off, std::uint8_t* __restrict__ xp,
                                                      float* __restrict__ xps) {
  const int p = blockIdx.x;
  const int r = row_src[p];
  const int kblocks = hidden / kBlock, vecs = hidden / 16;
  uint4* dst = reinterpret_cast<uint4*>(xp + std::int64_t(p) * hidden);
  if (r >= 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src + std::int64_t(r) * src_stride);
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) dst[i] = s[i];
    for (int kb = threadIdx.x; kb < kblocks; kb += blockDim.x)
      xps[vec128_slot(row_expert, expert_off, p, kb, kblocks)] = src_scale[std::int64_t(r) * scale_stride + kb];
  } else {
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) dst[i] = make_uint4(0, 0, 0, 0);
    for (int kb = threadIdx.x; kb < kblocks; kb += blockDim.x)
      xps[vec128_slot(row_expert, expert_off, p, kb, kblocks)] = 1.0f;
  }
}

// One thread per vector of V (uint4 or uint32_t) of the flattened (row, vector) range, grid-stride.
template <class V>
__global__ void __launch_bounds__(256) gather_rows_kernel(const std::uint8_t* __restrict__ in, std::int64_t in_stride,
                                                          const int* __restrict__ src_row, std::int64_t total,
                                                          std::int64_t vecs, std::uint8_t* __restrict__ out,
                                                          std::int64_t out_stride) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / vecs, v = i % vecs;
    const V* s = reinterpret_cast<const V*>(in + std::int64_t(src_row[row]) * in_stride);
    reinterpret_cast<V*>(out + row * out_stride)[v] = s[v];
  }
}

// One warp per (row, 128-column block of h); lane l handles columns 4l .. 4l+3.
__global__ void __launch_bounds__(256) swiglu_quant_kernel(const std::uint16_t* __restrict__ y1, int inter, int rows,
                                                           const int* __restrict__ row_expert,
                                                           const int* __restrict__ expert_off,
                                                           std::uint8_t* __restrict__ hq, float* __restrict__ hqs) {
  const int nb = inter / kBlock;
  const std::int64_t warp = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= std::int64_t(rows) * nb) return;  // uniform per warp
  const int p = int(warp / nb), b = int(warp % nb);
  const std::int64_t gcol = std::int64_t(p) * 2 * inter + b * kBlock + lane * 4;
  const uint2 graw = *reinterpret_cast<const uint2*>(y1 + gcol);
  const uint2 uraw = *reinterpret_cast<const uint2*>(y1 + gcol + inter);
  const std::uint16_t g16[4] = {std::uint16_t(graw.x & 0xFFFF), std::uint16_t(graw.x >> 16),
                                std::uint16_t(graw.y & 0xFFFF), std::uint16_t(graw.y >> 16)};
  const std::uint16_t u16[4] = {std::uint16_t(uraw.x & 0xFFFF), std::uint16_t(uraw.x >> 16),
                                std::uint16_t(uraw.y & 0xFFFF), std::uint16_t(uraw.y >> 16)};
  float h[4], amax = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float g = bf16_bits_to_float(g16[i]), u = bf16_bits_to_float(u16[i]);
    h[i] = g / (1.0f + expf(-g)) * u;  // the reference's silu(g) * u, fp32
    amax = fmaxf(amax, fabsf(h[i]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  amax = fmaxf(amax, moe::kAmaxFloor);
  const float inv = moe::kFp8E4m3Max / amax;
  std::uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= std::uint32_t(moe::fp8_e4m3_encode(h[i] * inv)) << (8 * i);
  *reinterpret_cast<std::uint32_t*>(hq + std::int64_t(p) * inter + b * kBlock + lane * 4) = packed;
  if (lane == 0) hqs[vec128_slot(row_expert, expert_off, p, b, nb)] = amax / moe::kFp8E4m3Max;
}

// One block per token; each thread 4 consecutive columns at a time.
__global__ void __launch_bounds__(128) combine_kernel(const std::uint16_t* __restrict__ y2,
                                                      const float* __restrict__ w, const int* __restrict__ slot_row,
                                                      int topk, int hidden, float* __restrict__ out) {
  const int t = blockIdx.x;
  for (int c = threadIdx.x * 4; c < hidden; c += blockDim.x * 4) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int j = 0; j < topk; ++j) {
      const std::int64_t r = slot_row[std::int64_t(t) * topk + j];
      const float wt = w[std::int64_t(t) * topk + j];
      const uint2 raw = *reinterpret_cast<const uint2*>(y2 + r * hidden + c);
      const float y[4] = {bf16_bits_to_float(std::uint16_t(raw.x & 0xFFFF)), bf16_bits_to_float(std::uint16_t(raw.x >> 16)),
                          bf16_bits_to_float(std::uint16_t(raw.y & 0xFFFF)), bf16_bits_to_float(std::uint16_t(raw.y >> 16))};
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = __fadd_rn(acc[i], __fmul_rn(wt, y[i]));
    }
    *reinterpret_cast<float4*>(out + std::int64_t(t) * hidden + c) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  }
}

// 8 packed bytes (16 int4) -> 16 e4m3 codes per iteration.
__global__ void __launch_bounds__(256) int4_to_fp8_kernel(const uint2* __restrict__ in, std::int64_t n8,
                                                          std::uint64_t lo, std::uint64_t hi, uint4* __restrict__ out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n8;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const uint2 v = in[i];
    const std::uint32_t src[2] = {v.x, v.y};
    std::uint32_t word[4];
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {  // output word wi: packed bytes 2wi and 2wi+1, low nibble first
      const std::uint32_t two = (src[wi / 2] >> (16 * (wi % 2))) & 0xFFFFu;
      word[wi] = nibble_code(two & 0xF, lo, hi) | nibble_code((two >> 4) & 0xF, lo, hi) << 8 |
                 nibble_code((two >> 8) & 0xF, lo, hi) << 16 | nibble_code((two >> 12) & 0xF, lo, hi) << 24;
    }
    out[i] = make_uint4(word[0], word[1], word[2], word[3]);
  }
}

__device__ __forceinline__ int int4_at(const uint4& v, int i) {  // element i (0..31) of 16 packed bytes
  const std::uint32_t w = (&v.x)[i / 8];
  const int nib = int((w >> (4 * (i % 8))) & 0xF);
  return nib >= 8 ? nib - 16 : nib;
}

// One block per 128x128 weight block: blockIdx = (kb, nb, e). 256 threads, each two 16-byte chunks
// (32 int4 each) of the block's 128 rows x 64 packed bytes.
__global__ void __launch_bounds__(256) int4_requant_kernel(const std::uint8_t* __restrict__ packed,
                                                           const float* __restrict__ scale, int n, int k,
                                                           std::uint8_t* __restrict__ out,
                                                           float* __restrict__ out_scale, int ld) {
  const int kb = blockIdx.x, nb = blockIdx.y, e = blockIdx.z, kblocks = k / kBlock;
  __shared__ float warp_max[8];
  __shared__ float block_amax;
  uint4 chunk[2];
  float s[2];
  std::int64_t row[2];
  int part[2];
  float m = 0.f;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int idx = threadIdx.x + c * 256;  // 0 .. 511
    row[c] = std::int64_t(e) * n + std::int64_t(nb) * kBlock + idx / 4;
    part[c] = idx % 4;
    chunk[c] = *reinterpret_cast<const uint4*>(packed + row[c] * (k / 2) + kb * (kBlock / 2) + part[c] * 16);
    s[c] = scale[row[c] * kblocks + kb];
#pragma unroll
    for (int i = 0; i < 32; ++i) m = fmaxf(m, fabsf(float(int4_at(chunk[c], i)) * s[c]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float a = 0.f;
    for (int i = 0; i < 8; ++i) a = fmaxf(a, warp_max[i]);
    a = fmaxf(a, moe::kAmaxFloor);
    block_amax = a;
    out_scale[(std::int64_t(e) * (n / kBlock) + nb) * ld + kb] = a / moe::kFp8E4m3Max;
  }
  __syncthreads();
  const float inv = moe::kFp8E4m3Max / block_amax;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    std::uint32_t word[8];
#pragma unroll
    for (int wi = 0; wi < 8; ++wi) {
      std::uint32_t w = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b)
        w |= std::uint32_t(moe::fp8_e4m3_encode(float(int4_at(chunk[c], wi * 4 + b)) * s[c] * inv)) << (8 * b);
      word[wi] = w;
    }
    uint4* dst = reinterpret_cast<uint4*>(out + row[c] * k + kb * kBlock + part[c] * 32);
    dst[0] = make_uint4(word[0], word[1], word[2], word[3]);
    dst[1] = make_uint4(word[4], word[5], word[6], word[7]);
  }
}

__global__ void __launch_bounds__(256) transpose_scales_kernel(const float* __restrict__ in, int n, int kblocks,
                                                               std::int64_t total, float* __restrict__ out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t per = std::int64_t(n) * kblocks;
    const std::int64_t e = i / per, rem = i % per, r = rem / kblocks, kb = rem % kblocks;
    out[(e * kblocks + kb) * n + r] = in[i];
  }
}

__global__ void __launch_bounds__(256) fill_fp8_kernel(std::uint8_t* __restrict__ p, std::int64_t n,
                                                       std::uint32_t seed) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t h = hash::lowbias32(seed ^ hash::lowbias32(std::uint32_t(i) ^ std::uint32_t(i >> 32) * 0x9E3779B9u));
    // sign | exponent field 6 or 7 | mantissa: magnitudes in [0.5, 2), never NaN.
    p[i] = std::uint8_t((h & 0x80u) | 0x30u | ((h >> 8) & 0x0Fu));
  }
}

__global__ void __launch_bounds__(256) fill_f32_kernel(float* __restrict__ p, std::int64_t n, float v) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

int grid_for(std::int64_t n, int threads) {
  const std::int64_t g = (n + threads - 1) / threads;
  return int(g < 65536 ? (g < 1 ? 1 : g) : 65536);  // grid-stride loops cover the rest
}

}  // namespace

cudaError_t launch_permute(const std::uint8_t* src, std::int64_t src_stride, const float* src_scale,
                           std::int64_t scale_stride, int hidden, const int* row_src, const int* row_expert,
                           const int* expert_off, int rows, std::uint8_t* xp, float* xps, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  permute_kernel<<<rows, 128, 0, stream>>>(src, src_stride, src_scale, scale_stride, hidden, row_src, row_expert,
                                           expert_off, xp, xps);
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const void* in, std::int64_t in_stride, const int* src_row, int rows,
                               std::int64_t row_bytes, void* out, std::int64_t out_stride, cudaStream_t stream) {
  if (rows <= 0 || row_bytes <= 0) return cudaSuccess;
  auto multiple = [&](std::int64_t m) {
    return reinterpret_cast<std::uintptr_t>(in) % m == 0 && reinterpret_cast<std::uintptr_t>(out) % m == 0 &&
           in_stride % m == 0 && out_stride % m == 0 && row_bytes % m == 0;
  };
  const auto* i8 = static_cast<const std::uint8_t*>(in);
  auto* o8 = static_cast<std::uint8_t*>(out);
  if (multiple(16)) {
    const std::int64_t vecs = row_bytes / 16, total = vecs * rows;
    gather_rows_kernel<uint4><<<grid_for(total, 256), 256, 0, stream>>>(i8, in_stride, src_row, total, vecs, o8,
                                                                        out_stride);
  } else if (multiple(4)) {
    const std::int64_t vecs = row_bytes / 4, total = vecs * rows;
    gather_rows_kernel<std::uint32_t><<<grid_for(total, 256), 256, 0, stream>>>(i8, in_stride, src_row, total, vecs,
                                                                                o8, out_stride);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_swiglu_quant(const std::uint16_t* y1, int inter, const int* row_expert, const int* expert_off,
                                int rows, std::uint8_t* hq, float* hqs, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const std::int64_t warps = std::int64_t(rows) * (inter / kBlock);
  const std::int64_t blocks = (warps + 7) / 8;
  swiglu_quant_kernel<<<unsigned(blocks), 256, 0, stream>>>(y1, inter, rows, row_expert, expert_off, hq, hqs);
  return cudaGetLastError();
}

cudaError_t launch_combine(const std::uint16_t* y2, const float* topk_weight, const int* slot_row, int tokens,
                           int topk, int hidden, float* out, cudaStream_t stream) {
  if (tokens <= 0) return cudaSuccess;
  combine_kernel<<<tokens, 128, 0, stream>>>(y2, topk_weight, slot_row, topk, hidden, out);
  return cudaGetLastError();
}

cudaError_t launch_int4_to_fp8(const std::uint8_t* packed, std::int64_t n_bytes, std::uint64_t code_lo,
                               std::uint64_t code_hi, std::uint8_t* out, cudaStream_t stream) {
  const std::int64_t n8 = n_bytes / 8;
  if (n8 <= 0) return cudaSuccess;
  int4_to_fp8_kernel<<<grid_for(n8, 256), 256, 0, stream>>>(reinterpret_cast<const uint2*>(packed), n8, code_lo,
                                                            code_hi, reinterpret_cast<uint4*>(out));
  return cudaGetLastError();
}

cudaError_t launch_int4_requant_128(const std::uint8_t* packed, const float* scale, int experts, int n, int k,
                                    std::uint8_t* out, float* out_scale, int ld, cudaStream_t stream) {
  if (experts <= 0 || n <= 0 || k <= 0) return cudaSuccess;
  int4_requant_kernel<<<dim3(k / kBlock, n / kBlock, experts), 256, 0, stream>>>(packed, scale, n, k, out, out_scale,
                                                                                 ld);
  return cudaGetLastError();
}

cudaError_t launch_transpose_scales(const float* in, int experts, int n, int kblocks, float* out, cudaStream_t stream) {
  const std::int64_t total = std::int64_t(experts) * n * kblocks;
  if (total <= 0) return cudaSuccess;
  transpose_scales_kernel<<<grid_for(total, 256), 256, 0, stream>>>(in, n, kblocks, total, out);
  return cudaGetLastError();
}

cudaError_t launch_fill_fp8(std::uint8_t* p, std::int64_t n, std::uint32_t seed, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_fp8_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n, seed);
  return cudaGetLastError();
}

cudaError_t launch_fill_f32(float* p, std::int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}

// The memory floor's stream: one chunk per CTA iteration (persistent grid). A chunk's 16-byte-aligned body is read
// by every thread with kUnroll independent vector loads in flight (evict-first, or non-coherent without L1
// allocation), its unaligned ends byte by byte; every byte is summed (__vsadu4 against 0, 32-bit per chunk, then
// 64-bit) so that no load can be elided and a test can check coverage.
constexpr int kStreamThreads = 256;
template <bool kEvictFirst>
__device__ __forceinline__ uint4 stream_load(const uint4* p) {
  if constexpr (kEvictFirst) {
    return __ldcs(p);
  } else {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
}
__device__ __forceinline__ unsigned sum16(uint4 v) {
  return __vsadu4(v.x, 0u) + __vsadu4(v.y, 0u) + __vsadu4(v.z, 0u) + __vsadu4(v.w, 0u);
}
// Chunk c of the read ranges: its bytes [b, e) (the last r with prefix[r] <= c holds it).
__device__ __forceinline__ void stream_chunk(const StreamRange* ranges, const unsigned long long* prefix, int n_ranges,
                                             unsigned long long c, unsigned long long chunk_bytes,
                                             const std::uint8_t*& b, const std::uint8_t*& e) {
  int lo = 0, hi = n_ranges - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (prefix[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  const unsigned long long off = (c - prefix[lo]) * chunk_bytes;
  b = ranges[lo].p + off;
  e = ranges[lo].p + min(off + chunk_bytes, ranges[lo].bytes);
}
__device__ __forceinline__ const std::uint8_t* align_up16(const std::uint8_t* p) {
  return reinterpret_cast<const std::uint8_t*>((reinterpret_cast<uintptr_t>(p) + 15) & ~uintptr_t(15));
}
__device__ __forceinline__ const std::uint8_t* align_down16(const std::uint8_t* p) {
  return reinterpret_cast<const std::uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(15));
}

template <int kUnroll, bool kEvictFirst>
__global__ void __launch_bounds__(kStreamThreads) byte_stream_kernel(
    const StreamRange* __restrict__ ranges, const unsigned long long* __restrict__ prefix, int n_ranges,
    unsigned long long read_chunks, unsigned long long chunk_bytes, uint4* __restrict__ write,
    unsigned long long write_bytes, unsigned long long* checksum) {
  const unsigned tid = threadIdx.x;
  unsigned long long acc = 0;
  const unsigned long long write_chunks = (write_bytes + chunk_bytes - 1) / chunk_bytes;
  for (unsigned long long c = blockIdx.x; c < read_chunks + write_chunks; c += gridDim.x) {
    if (c >= read_chunks) {  // a chunk of the write range
      const unsigned long long w0 = (c - read_chunks) * chunk_bytes / 16;
      const unsigned long long w1 = min(w0 + chunk_bytes / 16, write_bytes / 16);
      const uint4 one = make_uint4(0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u);
      for (unsigned long long i = w0 + tid; i < w1; i += kStreamThreads) __stcs(write + i, one);
      continue;
    }
    const std::uint8_t *b, *e;
    stream_chunk(ranges, prefix, n_ranges, c, chunk_bytes, b, e);
    const std::uint8_t *ab = align_up16(b), *ae = align_down16(e);
    unsigned part = 0;  // < 2^32: a chunk is at most 16 MiB, a thread's share of it 64 KiB of bytes <= 255
    if (ab >= ae) {  // shorter than an aligned vector
      for (const std::uint8_t* q = b + tid; q < e; q += kStreamThreads) part += *q;
    } else {
      if (int(tid) < ab - b) part += b[tid];
      if (int(tid) < e - ae) part += ae[tid];
      const uint4* v = reinterpret_cast<const uint4*>(ab);
      const long long n = (ae - ab) / 16;
      long long i = tid;
      for (; i + (kUnroll - 1) * kStreamThreads < n; i += kUnroll * kStreamThreads) {
        uint4 r[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) r[u] = stream_load<kEvictFirst>(v + i + u * kStreamThreads);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) part += sum16(r[u]);
      }
      for (; i < n; i += kStreamThreads) part += sum16(stream_load<kEvictFirst>(v + i));
    }
    acc += part;
  }
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (tid % 32 == 0 && acc) atomicAdd(checksum, acc);
}

// The bulk-copy form: the SM's copy engine (cp.async.bulk, 16 KiB pieces into a ring of kBulkStages in shared memory,
// one thread issuing) instead of the threads' loads; every thread sums each piece from shared memory, then thread 0
// refills the stage. A piece of size 0 says the CTA's chunks are done. The chunks' unaligned ends are read by
// thread 0 directly, the write chunks with plain stores after the reads.
constexpr int kBulkStages = 6, kBulkPiece = 16384;
constexpr int kBulkSmem = kBulkStages * kBulkPiece;
__global__ void __launch_bounds__(kStreamThreads) byte_stream_bulk_kernel(
    const StreamRange* __restrict__ ranges, const unsigned long long* __restrict__ prefix, int n_ranges,
    unsigned long long read_chunks, unsigned long long chunk_bytes, uint4* __restrict__ write,
    unsigned long long write_bytes, unsigned long long* checksum) {
  extern __shared__ __align__(128) std::uint8_t ring[];
  __shared__ __align__(8) std::uint64_t full[kBulkStages];
  __shared__ unsigned piece[kBulkStages];
  const unsigned tid = threadIdx.x;
  unsigned long long acc = 0;
  // thread 0's cursor over the aligned bodies of this CTA's read chunks
  unsigned long long chunk = blockIdx.x;
  const std::uint8_t *pos = nullptr, *end = nullptr;
  auto issue = [&](int st) {  // thread 0: the next piece into stage st (size 0 when none is left)
    while (pos >= end && chunk < read_chunks) {
      const std::uint8_t *b, *e;
      stream_chunk(ranges, prefix, n_ranges, chunk, chunk_bytes, b, e);
      pos = align_up16(b);
      end = align_down16(e);
      if (pos >= end) {  // shorter than an aligned vector
        for (const std::uint8_t* q = b; q < e; ++q) acc += *q;
      } else {
        for (const std::uint8_t* q = b; q < pos; ++q) acc += *q;
        for (const std::uint8_t* q = end; q < e; ++q) acc += *q;
      }
      chunk += gridDim.x;
    }
    const unsigned n = pos < end ? unsigned(min((long long)kBulkPiece, (long long)(end - pos))) : 0u;
    piece[st] = n;
    ptx::mbar_arrive_expect_tx_release_cta(&full[st], n);
    if (n) ptx::bulk_load(ring + st * kBulkPiece, pos, n, &full[st]);
    pos += n;
  };
  if (tid == 0) {
    for (int st = 0; st < kBulkStages; ++st) ptx::mbar_init(&full[st], 1);
    ptx::fence_mbar_init_release_cluster();
  }
  __syncthreads();
  if (tid == 0)
    for (int st = 0; st < kBulkStages; ++st) issue(st);
  for (unsigned i = 0;; ++i) {
    const int st = int(i % kBulkStages);
    const long long t0 = clock64();  // a bounded wait: a lost piece traps instead of hanging the bench
    while (!ptx::mbar_test_wait_acquire_cta(&full[st], (i / kBulkStages) & 1))
      if (clock64() - t0 > (1ll << 35)) __trap();
    const unsigned n = piece[st];
    if (n == 0) break;
    const uint4* v = reinterpret_cast<const uint4*>(ring + st * kBulkPiece);
    unsigned part = 0;
    for (unsigned j = tid; j < n / 16; j += kStreamThreads) part += sum16(v[j]);
    acc += part;
    __syncthreads();  // every thread done with the stage before it is refilled
    if (tid == 0) issue(st);
  }
  const unsigned long long write_chunks = (write_bytes + chunk_bytes - 1) / chunk_bytes;
  const uint4 one = make_uint4(0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u);
  for (unsigned long long c = blockIdx.x; c < write_chunks; c += gridDim.x) {
    const unsigned long long w0 = c * chunk_bytes / 16, w1 = min(w0 + chunk_bytes / 16, write_bytes / 16);
    for (unsigned long long i = w0 + tid; i < w1; i += kStreamThreads) __stcs(write + i, one);
  }
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (tid % 32 == 0 && acc) atomicAdd(checksum, acc);
}

using StreamKernel = void (*)(const StreamRange*, const unsigned long long*, int, unsigned long long,
                              unsigned long long, uint4*, unsigned long long, unsigned long long*);
constexpr StreamKernel kStreamKernels[kByteStreamVariants] = {
    byte_stream_kernel<4, true>, byte_stream_kernel<8, true>, byte_stream_kernel<4, false>,
    byte_stream_kernel<8, false>, byte_stream_bulk_kernel};
constexpr int kStreamSmem[kByteStreamVariants] = {0, 0, 0, 0, kBulkSmem};

const char* byte_stream_variant_name(int variant) {
  static const char* const names[kByteStreamVariants] = {"u4-evict-first", "u8-evict-first", "u4-nc-no-l1",
                                                         "u8-nc-no-l1", "bulk-copy"};
  return variant >= 0 && variant < kByteStreamVariants ? names[variant] : "?";
}

cudaError_t launch_byte_stream(int variant, const StreamRange* ranges, const unsigned long long* prefix,
                               int n_ranges, unsigned long long read_chunks, unsigned long long chunk_bytes,
                               void* write, unsigned long long write_bytes, unsigned long long* checksum, int grid,
                               cudaStream_t stream) {
  if (variant < 0 || variant >= kByteStreamVariants) return cudaErrorInvalidValue;
  if (grid <= 0 || (read_chunks == 0 && write_bytes == 0)) return cudaSuccess;
  kStreamKernels[variant]<<<grid, kStreamThreads, kStreamSmem[variant], stream>>>(ranges, prefix, n_ranges, read_chunks, chunk_bytes,
                                                               static_cast<uint4*>(write), write_bytes, checksum);
  return cudaGetLastError();
}

int byte_stream_grid(int variant) {
  int dev = 0, sms = 0, per_sm = 0;
  if (variant < 0 || variant >= kByteStreamVariants || cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaFuncSetAttribute(kStreamKernels[variant], cudaFuncAttributeMaxDynamicSharedMemorySize,
                           kStreamSmem[variant]) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kStreamKernels[variant], kStreamThreads,
                                                    kStreamSmem[variant]) != cudaSuccess)
    return 0;
  return sms * per_sm;
}

}  // namespace xstage::moe_bench::detail
