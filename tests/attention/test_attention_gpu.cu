// GPU tests of the attention forward kernel through its C ABI (label gpu; skipped without an sm_90 GPU).
//
// Reference: a deliberately simple kernel, one block per (query row, head, batch), computed from the
// same bf16/fp16 inputs with double accumulation and a two-pass softmax. Alongside it, the same
// computation with P rounded to the input dtype and the output rounded to it, as the kernel does
// ("lowprec"). Tolerance (FlashAttention-3's rule, over the whole tensor):
//     max|out - ref| <= 2 * max|lowprec - ref| + atol,   atol = one ulp of the dtype at 0.25..0.5.
// LSE is fp32 in the kernel with no low-precision step: |lse - ref| <= 1e-3 + 1e-4 |ref|.
// Outputs (and LSE) are poisoned with NaN (all-ones bytes) before the call: every logical element must
// be written and finite, and every byte of the allocation outside the logical tensor must stay poisoned.
// Input padding is NaN too, so a kernel that reads outside the logical tensor produces NaN and fails.
// Causal is bottom-right aligned: query i sees keys j <= i + seqlen_kv - seqlen_q; a query that sees
// no key gets output 0 and an infinite LSE (either sign).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "xstage/attention.h"

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CUDA_CHECK(expr) cuda_check((expr), #expr)

// Why the GPU tests cannot run here, or "" when they can.
std::string skip_reason() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0)
    return "needs an sm_90 GPU (H100/H200), found " + std::string(prop.name) + " (cc " + std::to_string(prop.major) +
           "." + std::to_string(prop.minor) + ")";
  return "";
}

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { CUDA_CHECK(cudaMalloc(&p, n)); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
};

// ---- device helpers -------------------------------------------------------------------------------

template <class T> __host__ __device__ float to_float(T x);
template <> __host__ __device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __host__ __device__ float to_float(__half x) { return __half2float(x); }
template <class T> __device__ T from_float(float x);
template <> __device__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __half from_float(float x) { return __float2half_rn(x); }

__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// amp * N(0,1) (Box-Muller from one 64-bit hash of (seed, index)) into the logical elements of a
// strided (batch, seq, heads, dim) tensor.
template <class T>
__global__ void fill_normal(T* base, int64_t s0, int64_t s1, int64_t s2, int batch, int seq, int heads, int dim,
                            uint64_t seed, float amp) {
  const int64_t n = int64_t{batch} * seq * heads * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int d = i % dim, h = (i / dim) % heads, s = (i / dim / heads) % seq, b = i / dim / heads / seq;
    const uint64_t r = splitmix64(seed * 0x100000001B3ull ^ static_cast<uint64_t>(i));
    const float u1 = ((r >> 40) + 0.5f) * 0x1p-24f, u2 = ((r & 0xFFFFFF) + 0.5f) * 0x1p-24f;
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    base[b * s0 + s * s1 + h * s2 + d] = from_float<T>(amp * z);
  }
}

template <class T>
struct RefArgs {
  const T *q, *k, *v;
  int64_t qs[3], ks[3], vs[3];
  int batch, sq, skv, heads, dim, causal;
  double scale;
  float *ref, *lowp, *lse;  // ref/lowp: contiguous [batch, sq, heads, dim]; lse: [batch, heads, sq]
};

constexpr int kRefThreads = 128;  // >= head_dim, so the PV pass gives each thread one output column

__device__ double block_reduce(double x, bool is_max, double* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const double y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmax(x, y) : x + y;
  }
  const int w = threadIdx.x / 32;
  __syncthreads();  // red[] may still be read by the previous reduction
  if (threadIdx.x % 32 == 0) red[w] = x;
  __syncthreads();
  double r = red[0];
  for (int i = 1; i < kRefThreads / 32; ++i) r = is_max ? fmax(r, red[i]) : r + red[i];
  return r;
}

// One block per (query row i, head h, batch b). Scores in shared memory (skv floats).
template <class T>
__global__ void __launch_bounds__(kRefThreads) reference_attention(RefArgs<T> a) {
  extern __shared__ float p[];
  __shared__ float qrow[128];
  __shared__ double red[kRefThreads / 32];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* q = a.q + b * a.qs[0] + i * a.qs[1] + h * a.qs[2];
  for (int d = threadIdx.x; d < a.dim; d += blockDim.x) qrow[d] = to_float(q[d]);
  __syncthreads();
  // Keys visible to row i: [0, nvis).
  const int64_t lim = a.causal ? int64_t{i} + a.skv - a.sq + 1 : a.skv;
  const int nvis = static_cast<int>(lim < 0 ? 0 : lim > a.skv ? a.skv : lim);
  for (int j = warp; j < nvis; j += kRefThreads / 32) {  // a warp per key
    const T* kr = a.k + b * a.ks[0] + int64_t{j} * a.ks[1] + h * a.ks[2];
    double acc = 0;
    for (int d = lane; d < a.dim; d += 32) acc += double(qrow[d]) * double(to_float(kr[d]));
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) p[j] = static_cast<float>(acc * a.scale);
  }
  __syncthreads();
  double m = -INFINITY;
  for (int j = threadIdx.x; j < nvis; j += blockDim.x) m = fmax(m, double(p[j]));
  m = block_reduce(m, true, red);
  double l = 0;
  for (int j = threadIdx.x; j < nvis; j += blockDim.x) {
    const float e = static_cast<float>(exp(double(p[j]) - m));
    p[j] = e;
    l += e;
  }
  l = block_reduce(l, false, red);  // also the barrier that publishes p[]
  const int64_t row = ((int64_t{b} * a.sq + i) * a.heads + h) * a.dim;
  for (int d = threadIdx.x; d < a.dim; d += blockDim.x) {
    double acc = 0, acc_lp = 0;
    for (int j = 0; j < nvis; ++j) {
      const double vj = to_float(a.v[b * a.vs[0] + int64_t{j} * a.vs[1] + h * a.vs[2] + d]);
      acc += double(p[j]) * vj;
      acc_lp += double(to_float(from_float<T>(p[j]))) * vj;
    }
    a.ref[row + d] = nvis > 0 ? static_cast<float>(acc / l) : 0.f;
    a.lowp[row + d] = nvis > 0 ? to_float(from_float<T>(static_cast<float>(acc_lp / l))) : 0.f;
  }
  if (threadIdx.x == 0) a.lse[(int64_t{b} * a.heads + h) * a.sq + i] = nvis > 0 ? static_cast<float>(m + log(l)) : -INFINITY;
}

// ---- host side ------------------------------------------------------------------------------------

enum class Layout {
  Contiguous,  // (batch, seq, heads, dim), dense
  Padded,      // every stride padded (multiples of 8 elements), the gaps stay poisoned
  BHSD,        // storage (batch, heads, seq, dim): seq stride = dim
  PackedQKV,   // q, k, v: views of one (batch, seq, 3, heads, dim) tensor (inputs only; sq == skv)
};

struct Case {
  const char* name;
  xstage_dtype dtype;
  int batch, sq, skv, heads, dim;
  Layout in, out;
  bool lse;
  int causal;
  float scale;  // 0: default 1/sqrt(dim)
  float q_amp;  // q ~ q_amp * N(0,1); larger values make the softmax peaky
};

// A strided (batch, seq, heads, dim) tensor in a larger allocation; `first` is the logical start.
struct Tensor {
  int64_t stride[3];
  int64_t first;  // element offset of [0,0,0,0] in the allocation
  size_t elems;   // allocation size in elements
};

Tensor make_layout(Layout l, int batch, int seq, int heads, int dim) {
  const int64_t B = batch, S = seq, H = heads, D = dim;
  switch (l) {
    case Layout::Contiguous: return {{S * H * D, H * D, D}, 0, size_t(B * S * H * D)};
    case Layout::Padded: {
      const int64_t hs = D + 24, ss = H * hs + 40, bs = S * ss + 72, first = 32;
      return {{bs, ss, hs}, first, size_t(first + B * bs + 48)};
    }
    case Layout::BHSD: return {{H * S * D, D, S * D}, 0, size_t(B * S * H * D)};
    case Layout::PackedQKV: return {{S * 3 * H * D, 3 * H * D, D}, 0, size_t(B * S * 3 * H * D)};
  }
  throw std::logic_error("layout");
}

std::string case_name(const testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // readable CTest names

float bits_to_float(uint16_t bits, xstage_dtype t) {
  if (t == XSTAGE_DTYPE_BF16) {
    uint32_t u = uint32_t{bits} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half_raw r;
  r.x = bits;
  return __half2float(__half(r));
}

constexpr uint16_t kPoison16 = 0xFFFF;  // NaN in bf16 and fp16
constexpr uint32_t kPoison32 = 0xFFFFFFFF;
constexpr int kLsePad = 16;  // poisoned floats before and after the LSE array

struct Outcome {
  std::vector<uint16_t> o;    // the whole output allocation
  std::vector<float> lse;     // kLsePad + B*H*sq + kLsePad
  int rc = 0;
  std::string error;
};

class AttentionGpu : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const std::string why = skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

// Inputs, reference and poisoned outputs for one case; `call()` runs the kernel and copies back.
struct Problem {
  Case c;
  Tensor tq, tk, tv, to;
  std::unique_ptr<DevBuf> qbuf, kbuf, vbuf, obuf, lsebuf, ref, lowp, lseref;
  const char *q, *k, *v;  // logical starts (bytes)
  xstage_attn_fwd_params params{};

  explicit Problem(const Case& cs, uint64_t seed) : c(cs) {
    const size_t es = 2;
    if (c.in == Layout::PackedQKV) {
      tq = make_layout(Layout::PackedQKV, c.batch, c.sq, c.heads, c.dim);
      tk = tv = tq;
      tk.first = int64_t{c.heads} * c.dim;
      tv.first = 2 * int64_t{c.heads} * c.dim;
      qbuf = std::make_unique<DevBuf>(tq.elems * es);
      CUDA_CHECK(cudaMemset(qbuf->p, 0xFF, qbuf->bytes));
      q = static_cast<char*>(qbuf->p);
      k = q + tk.first * es;
      v = q + tv.first * es;
    } else {
      tq = make_layout(c.in, c.batch, c.sq, c.heads, c.dim);
      tk = make_layout(c.in, c.batch, c.skv, c.heads, c.dim);
      tv = tk;
      qbuf = std::make_unique<DevBuf>(tq.elems * es);
      kbuf = std::make_unique<DevBuf>(tk.elems * es);
      vbuf = std::make_unique<DevBuf>(tv.elems * es);
      for (auto* b : {qbuf.get(), kbuf.get(), vbuf.get()}) CUDA_CHECK(cudaMemset(b->p, 0xFF, b->bytes));
      q = static_cast<char*>(qbuf->p) + tq.first * es;
      k = static_cast<char*>(kbuf->p) + tk.first * es;
      v = static_cast<char*>(vbuf->p) + tv.first * es;
    }
    to = make_layout(c.out, c.batch, c.sq, c.heads, c.dim);
    obuf = std::make_unique<DevBuf>(to.elems * es);
    const size_t rows_q = size_t(c.batch) * c.heads * c.sq;
    lsebuf = std::make_unique<DevBuf>((rows_q + 2 * kLsePad) * sizeof(float));
    if (c.dtype == XSTAGE_DTYPE_BF16) fill<__nv_bfloat16>(seed); else fill<__half>(seed);

    params.q = q;
    params.k = k;
    params.v = v;
    params.o = static_cast<char*>(obuf->p) + to.first * es;
    params.lse = c.lse ? static_cast<float*>(lsebuf->p) + kLsePad : nullptr;
    params.batch = c.batch;
    params.seqlen_q = c.sq;
    params.seqlen_kv = c.skv;
    params.heads = c.heads;
    params.head_dim = c.dim;
    std::copy(tq.stride, tq.stride + 3, params.q_stride);
    std::copy(tk.stride, tk.stride + 3, params.k_stride);
    std::copy(tv.stride, tv.stride + 3, params.v_stride);
    std::copy(to.stride, to.stride + 3, params.o_stride);
    params.softmax_scale = c.scale;
    params.causal = c.causal;
    params.dtype = c.dtype;
  }

  template <class T>
  void fill(uint64_t seed) {
    const float amps[3] = {c.q_amp, 1.f, 1.f};
    const Tensor* ts[3] = {&tq, &tk, &tv};
    const char* ptrs[3] = {q, k, v};
    const int seqs[3] = {c.sq, c.skv, c.skv};
    for (int t = 0; t < 3; ++t) {
      fill_normal<T><<<1024, 256>>>(reinterpret_cast<T*>(const_cast<char*>(ptrs[t])), ts[t]->stride[0], ts[t]->stride[1],
                                    ts[t]->stride[2], c.batch, seqs[t], c.heads, c.dim, seed + 7919 * t, amps[t]);
      CUDA_CHECK(cudaGetLastError());
    }
    const size_t n = size_t(c.batch) * c.sq * c.heads * c.dim, rows = size_t(c.batch) * c.heads * c.sq;
    ref = std::make_unique<DevBuf>(n * sizeof(float));
    lowp = std::make_unique<DevBuf>(n * sizeof(float));
    lseref = std::make_unique<DevBuf>(rows * sizeof(float));
    RefArgs<T> a{};
    a.q = reinterpret_cast<const T*>(q);
    a.k = reinterpret_cast<const T*>(k);
    a.v = reinterpret_cast<const T*>(v);
    std::copy(tq.stride, tq.stride + 3, a.qs);
    std::copy(tk.stride, tk.stride + 3, a.ks);
    std::copy(tv.stride, tv.stride + 3, a.vs);
    a.batch = c.batch;
    a.sq = c.sq;
    a.skv = c.skv;
    a.heads = c.heads;
    a.dim = c.dim;
    a.causal = c.causal;
    a.scale = c.scale > 0 ? double(c.scale) : 1.0 / std::sqrt(double(c.dim));
    a.ref = static_cast<float*>(ref->p);
    a.lowp = static_cast<float*>(lowp->p);
    a.lse = static_cast<float*>(lseref->p);
    const size_t smem = size_t(c.skv) * sizeof(float);
    CUDA_CHECK(cudaFuncSetAttribute(reference_attention<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    reference_attention<T><<<dim3(c.sq, c.heads, c.batch), kRefThreads, smem>>>(a);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  void poison() {
    CUDA_CHECK(cudaMemset(obuf->p, 0xFF, obuf->bytes));
    CUDA_CHECK(cudaMemset(lsebuf->p, 0xFF, lsebuf->bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  Outcome call(cudaStream_t stream) {
    poison();
    Outcome r;
    r.rc = xstage_attn_fwd(&params, stream);
    r.error = xstage_last_error();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    r.o.resize(to.elems);
    CUDA_CHECK(cudaMemcpy(r.o.data(), obuf->p, obuf->bytes, cudaMemcpyDeviceToHost));
    r.lse.resize(lsebuf->bytes / sizeof(float));
    CUDA_CHECK(cudaMemcpy(r.lse.data(), lsebuf->p, lsebuf->bytes, cudaMemcpyDeviceToHost));
    return r;
  }
};

// Checks a finished run against the reference; every failure is a gtest failure with the index.
void verify(const Problem& pb, const Outcome& r) {
  const Case& c = pb.c;
  const size_t n = size_t(c.batch) * c.sq * c.heads * c.dim, rows = size_t(c.batch) * c.heads * c.sq;
  std::vector<float> ref(n), lowp(n), lseref(rows);
  CUDA_CHECK(cudaMemcpy(ref.data(), pb.ref->p, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(lowp.data(), pb.lowp->p, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(lseref.data(), pb.lseref->p, rows * sizeof(float), cudaMemcpyDeviceToHost));

  std::vector<uint8_t> logical(pb.to.elems, 0);
  size_t bad = 0, nonzero_empty = 0;
  double max_err = 0, max_lp = 0;
  size_t worst = 0;
  std::ostringstream first_bad;
  for (int b = 0; b < c.batch; ++b)
    for (int s = 0; s < c.sq; ++s)
      for (int h = 0; h < c.heads; ++h)
        for (int d = 0; d < c.dim; ++d) {
          const size_t at = pb.to.first + b * pb.to.stride[0] + s * pb.to.stride[1] + h * pb.to.stride[2] + d;
          logical[at] = 1;
          const size_t li = ((size_t(b) * c.sq + s) * c.heads + h) * c.dim + d;
          const float out = bits_to_float(r.o[at], c.dtype);
          if (!std::isfinite(out)) {
            if (bad++ == 0) first_bad << "o[" << b << "," << s << "," << h << "," << d << "] = " << out;
            continue;
          }
          const double err = std::fabs(double(out) - ref[li]);
          if (err > max_err) max_err = err, worst = li;
          max_lp = std::max(max_lp, std::fabs(double(lowp[li]) - ref[li]));
          if (!std::isfinite(lseref[(size_t(b) * c.heads + h) * c.sq + s]) && out != 0.f) ++nonzero_empty;
        }
  EXPECT_EQ(bad, 0u) << "output elements unwritten (still NaN poison) or non-finite; first: " << first_bad.str();
  EXPECT_EQ(nonzero_empty, 0u) << "rows that see no key (causal) must be 0";

  size_t touched = 0, first_touched = 0;
  for (size_t i = 0; i < pb.to.elems; ++i)
    if (!logical[i] && r.o[i] != kPoison16 && touched++ == 0) first_touched = i;
  EXPECT_EQ(touched, 0u) << "bytes outside the logical output were written (padding); first at element "
                         << first_touched << " of the allocation";

  const double atol = c.dtype == XSTAGE_DTYPE_BF16 ? 0x1p-9 : 0x1p-12;  // one ulp at 0.25..0.5
  const double tol = 2 * max_lp + atol;
  EXPECT_LE(max_err, tol) << "max|out-ref| = " << max_err << " at flat index " << worst << " (out layout index "
                          << "b,s,h,d row-major; ref " << ref[worst] << "), 2*max|lowprec-ref| + atol = " << tol;
  // A sanity bound on the rule itself: the low-precision reference must be within a few dtype ulps.
  EXPECT_LT(max_lp, c.dtype == XSTAGE_DTYPE_BF16 ? 0.05 : 0.01) << "reference low-precision error unexpectedly large";

  // LSE: poisoned pad untouched, every entry written, matches the reference.
  size_t lse_bad = 0, lse_pad = 0;
  double lse_err = 0;
  std::ostringstream lse_first;
  for (size_t i = 0; i < r.lse.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &r.lse[i], 4);
    const bool in = c.lse && i >= size_t(kLsePad) && i < kLsePad + rows;
    if (!in) {
      lse_pad += bits != kPoison32;
      continue;
    }
    const float got = r.lse[i], want = lseref[i - kLsePad];
    const bool ok = std::isinf(want) ? std::isinf(got) : std::fabs(double(got) - want) <= 1e-3 + 1e-4 * std::fabs(want);
    if (std::isfinite(want) && std::isfinite(got)) lse_err = std::max(lse_err, std::fabs(double(got) - want));
    if (!ok && lse_bad++ == 0) lse_first << "lse[" << i - kLsePad << "] = " << got << ", reference " << want;
  }
  EXPECT_EQ(lse_pad, 0u) << (c.lse ? "LSE written outside [batch, heads, seqlen_q]" : "LSE written although lse = NULL");
  EXPECT_EQ(lse_bad, 0u) << "LSE entries wrong or unwritten; first: " << lse_first.str();
  std::printf("[ %s ] max|out-ref| %.3g  2*max|lowprec-ref|+atol %.3g  max|lse-ref| %.3g\n", c.name, max_err, tol,
              lse_err);
}

// Runs twice on the same inputs: the first run is checked against the reference; forward attention has
// no atomics, so the second must be bitwise identical (a difference means a race).
TEST_P(AttentionGpu, MatchesReference) {
  const Case& c = GetParam();
  Problem pb(c, 0x5eed0000u + std::hash<std::string>{}(c.name) % 100000);
  const Outcome r = pb.call(stream_);
  ASSERT_EQ(r.rc, XSTAGE_OK) << r.error;
  verify(pb, r);
  const Outcome r2 = pb.call(stream_);
  ASSERT_EQ(r2.rc, XSTAGE_OK) << r2.error;
  EXPECT_TRUE(r.o == r2.o) << "two runs on the same inputs differ";
  EXPECT_TRUE(std::memcmp(r.lse.data(), r2.lse.data(), r.lse.size() * sizeof(float)) == 0) << "LSE differs between runs";
}

constexpr Layout Cont = Layout::Contiguous, Pad = Layout::Padded, Bhsd = Layout::BHSD, Qkv = Layout::PackedQKV;
constexpr xstage_dtype BF = XSTAGE_DTYPE_BF16, FP = XSTAGE_DTYPE_FP16;

// Shapes: lengths 1, 127, 128, 8191 (q and kv separately), heads 1..40, D 64/128, both dtypes, batch > 1,
// every layout, LSE on/off, a peaky softmax, a custom scale, causal.
const Case kCases[] = {
    // name                      dtype  B   sq    skv   H   D    in out lse causal scale amp
    {"s1_d64",                    BF,   1,    1,    1,  1,  64, Cont, Cont, true, 0, 0.f, 1.f},
    {"sq1_skv8191_b2_h3_d128",    BF,   2,    1, 8191,  3, 128, Cont, Pad, true, 0, 0.f, 1.f},
    {"sq127_skv8191_b2_h3_d128",  BF,   2,  127, 8191,  3, 128, Pad, Pad, true, 0, 0.f, 1.f},
    {"sq8191_skv127_h2_d64_fp16", FP,   1, 8191,  127,  2,  64, Cont, Pad, true, 0, 0.f, 1.f},
    {"s128_h40_d128_nolse",       BF,   1,  128,  128, 40, 128, Cont, Cont, false, 0, 0.f, 1.f},
    {"s8191_h8_d128",             BF,   1, 8191, 8191,  8, 128, Cont, Cont, true, 0, 0.f, 1.f},
    {"s8191_h2_d64_fp16_padded",  FP,   1, 8191, 8191,  2,  64, Pad, Pad, true, 0, 0.f, 1.f},
    {"s1000_b2_h40_d64_fp16",     FP,   2, 1000, 1000, 40,  64, Cont, Cont, false, 0, 0.f, 1.f},
    {"packed_s257_b3_h5_d128",    BF,   3,  257,  257,  5, 128, Qkv, Pad, true, 0, 0.f, 1.f},
    {"bhsd_sq300_skv513_b2_h7_d64", BF, 2,  300,  513,  7,  64, Bhsd, Bhsd, true, 0, 0.f, 1.f},
    {"peaky_scale05_h6_d128",     BF,   1,  384, 1111,  6, 128, Cont, Cont, true, 0, 0.5f, 3.f},
    {"s127_b4_h1_d128_fp16",      FP,   4,  127,  127,  1, 128, Pad, Cont, true, 0, 0.f, 1.f},
    {"sq128_skv256_b2_h12_d64",   BF,   2,  128,  256, 12,  64, Cont, Cont, true, 0, 0.f, 1.f},
    {"sq200_skv333_h17_d128_fp16", FP,  1,  200,  333, 17, 128, Pad, Cont, false, 0, 0.f, 2.f},
    {"causal_s300_h4_d128",       BF,   1,  300,  300,  4, 128, Cont, Cont, true, 1, 0.f, 1.f},
    {"causal_sq127_skv1000_b2_d64_fp16", FP, 2, 127, 1000, 3, 64, Pad, Pad, true, 1, 0.f, 1.f},
    {"causal_sq1000_skv127_h2_d128", BF, 1, 1000,  127,  2, 128, Cont, Cont, true, 1, 0.f, 1.f},  // rows with no key
    // D = 64 with several waves of 192-row tiles (the shapes above fill at most one), causal and not
    {"causal_s4096_b2_h12_d64",   BF,   2, 4096, 4096, 12,  64, Cont, Cont, true, 1, 0.f, 1.f},
    {"s2048_b4_h20_d64_fp16",     FP,   4, 2048, 2048, 20,  64, Cont, Pad, true, 0, 0.f, 1.f},
};

INSTANTIATE_TEST_SUITE_P(attention, AttentionGpu, testing::ValuesIn(kCases), case_name);

// Valid-looking but unsupported parameters are refused before any write: the output stays poisoned.
TEST(attention_gpu_errors, UnsupportedHeadDimWritesNothing) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  Problem pb(Case{"hd", BF, 1, 64, 64, 2, 128, Cont, Cont, true, 0, 0.f, 1.f}, 1);
  pb.params.head_dim = 96;
  pb.params.q_stride[2] = pb.params.k_stride[2] = pb.params.v_stride[2] = pb.params.o_stride[2] = 128;
  const Outcome r = pb.call(nullptr);
  EXPECT_EQ(r.rc, XSTAGE_ERR_UNSUPPORTED);
  EXPECT_NE(r.error.find("head_dim = 96"), std::string::npos) << r.error;
  for (uint16_t x : r.o) ASSERT_EQ(x, kPoison16) << "output written although the call failed";
}

}  // namespace
