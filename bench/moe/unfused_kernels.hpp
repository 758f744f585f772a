#pragma once
// Internal: the CUDA kernels of the unfused MoE baseline (unfused.cu), launched by unfused.cpp. Plain
// C++ declarations (no CUDA types beyond cudaStream_t / cudaError_t). Every launcher returns the launch
// status (cudaGetLastError) and launches nothing for an empty range.
//
// Padded row layout (set_routing): expert e owns rows [off[e], off[e+1]) of the permuted buffers, off[e+1]
// - off[e] a multiple of 4; a 1x128-scaled buffer of K columns stores expert e's scales at
// off[e] * (K/128) + kb * (off[e+1] - off[e]) + (row - off[e]) (cuBLASLt VEC128: [K/128][rows_e]).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace xstage::moe_bench::detail {

// xp[p][:] = src row row_src[p] (codes at src + row * src_stride bytes, H/128 fp32 scales at src_scale +
// row * scale_stride floats), for p < rows; padding rows (row_src[p] < 0) get zero codes and unit scales.
// The scales land in the padded VEC128 layout above. src and src_stride multiples of 16 bytes, xp 16-byte
// aligned. UnfusedMoe: src = x [T][H], row_src = token; UnfusedEpMoe: src = the received packed rows.
cudaError_t launch_permute(const std::uint8_t* src, std::int64_t src_stride, const float* src_scale,
                           std::int64_t scale_stride, int hidden, const int* row_src, const int* row_expert,
                           const int* expert_off, int rows, std::uint8_t* xp, float* xps, cudaStream_t stream);

// Row gather: bytes [0, row_bytes) of out + i * out_stride = those of in + src_row[i] * in_stride, for i < rows
// (src_row[i] >= 0). 16-byte vectors when both pointers, both strides and row_bytes are multiples of 16,
// else 4-byte words (all must then be multiples of 4: cudaErrorInvalidValue otherwise).
cudaError_t launch_gather_rows(const void* in, std::int64_t in_stride, const int* src_row, int rows,
                               std::int64_t row_bytes, void* out, std::int64_t out_stride, cudaStream_t stream);

// From y1 (bf16 bits [rows][2I], gate columns then up columns): h = silu(g) * u, FP8 1x128 codes hq
// [rows][I] and scales hqs in the padded VEC128 layout.
cudaError_t launch_swiglu_quant(const std::uint16_t* y1, int inter, const int* row_expert, const int* expert_off,
                                int rows, std::uint8_t* hq, float* hqs, cudaStream_t stream);

// out[t][c] = sum_j w[t][j] * float(y2[slot_row[t*k + j]][c]) (fp32, slot order, no contraction).
cudaError_t launch_combine(const std::uint16_t* y2, const float* topk_weight, const int* slot_row, int tokens,
                           int topk, int hidden, float* out, cudaStream_t stream);

// int4 (two per byte, even element in the low nibble, two's complement) -> e4m3 codes, exact;
// n_bytes packed bytes (a multiple of 8; in and out 16-byte aligned). code_lo / code_hi: the e4m3 code
// of nibble value v (0..15 read as two's complement) in byte v of code_lo (v < 8) / code_hi (v >= 8).
cudaError_t launch_int4_to_fp8(const std::uint8_t* packed, std::int64_t n_bytes, std::uint64_t code_lo,
                               std::uint64_t code_hi, std::uint8_t* out, cudaStream_t stream);

// The W4A8 fallback: weights [E][N][K] as int4 with scales [E][N][K/128] -> e4m3 codes [E][N][K] and
// 128x128 block scales [E][N/128][ld] (ld >= K/128), per block amax = max(max|q*s|, 1e-4),
// code = e4m3(q*s * (448/amax)), scale = amax/448.
cudaError_t launch_int4_requant_128(const std::uint8_t* packed, const float* scale, int experts, int n, int k,
                                    std::uint8_t* out, float* out_scale, int ld, cudaStream_t stream);

// out[e][kb][n] = in[e][n][kb] (int4 group scales -> cuBLASLt VEC128 layout of A).
cudaError_t launch_transpose_scales(const float* in, int experts, int n, int kblocks, float* out, cudaStream_t stream);

// Synthetic data for the ceiling: e4m3 codes of magnitude in [0.5, 2) from a hash of (seed, index);
// a constant fp32 fill.
cudaError_t launch_fill_fp8(std::uint8_t* p, std::int64_t n, std::uint32_t seed, cudaStream_t stream);
cudaError_t launch_fill_f32(float* p, std::int64_t n, float value, cudaStream_t stream);

// The memory floor's stream (ByteStream, unfused.hpp): every byte of the read ranges read once (chunks of
// chunk_bytes, chunk i of range r at prefix[r] + i; prefix has n_ranges + 1 entries, prefix[n_ranges] chunks in
// all; chunk_bytes at most 16 MiB), their byte sum added to *checksum, and write_bytes (a multiple of 16, write
// 16-byte aligned) stored once (fp32 ones) in chunks of chunk_bytes after the read chunks. ranges and prefix are
// device arrays. Variants (the same result, other load forms): 4 or 8 vector loads in flight per thread, evict-first
// or non-coherent without L1 allocation (0-3); bulk copies into a shared-memory ring (4); cudaErrorInvalidValue for
// another variant.
struct StreamRange {
  const std::uint8_t* p;
  unsigned long long bytes;
};
inline constexpr int kByteStreamVariants = 5;
const char* byte_stream_variant_name(int variant);
cudaError_t launch_byte_stream(int variant, const StreamRange* ranges, const unsigned long long* prefix,
                               int n_ranges, unsigned long long read_chunks, unsigned long long chunk_bytes,
                               void* write, unsigned long long write_bytes, unsigned long long* checksum, int grid,
                               cudaStream_t stream);
// CTAs of a variant of launch_byte_stream that fill the current device (resident at once); 0 on failure.
int byte_stream_grid(int variant);

}  // namespace xstage::moe_bench::detail
