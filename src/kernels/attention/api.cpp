// C ABI of the attention forward kernel: validation (no device needed), device check, dispatch.
// Every error sets a thread-local message naming the bad value; nothing is launched or written then.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "api_internal.hpp"
#include "sm90_fwd.hpp"
#include "xstage/attention.h"
#include "xstage/common/version.hpp"

namespace {

thread_local std::string g_last_error;

// Sets the thread's message and returns `code`, so a failing check reads `return fail(code, ...)`.
__attribute__((format(printf, 2, 3))) int fail(int code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_last_error = buf;
  return code;
}

constexpr int64_t kElemBytes = 2;                  // bf16 and fp16
constexpr int64_t kTmaAlign = 16;                  // TMA: global address and strides in 16-byte units
constexpr int64_t kTmaMaxStrideBytes = int64_t{1} << 40;  // TMA: global strides below 2^40 bytes
constexpr int64_t kMaxRows = INT32_MAX;            // batch*heads*seqlen must fit int32 tile/LSE indexing

const char* const kDimName[3] = {"batch", "seq", "head"};

// Byte range [begin, end) touched by a (batch, seq, heads, dim) tensor; used for the overlap check.
struct Range {
  uintptr_t begin, end;
};

Range range_of(const void* ptr, const int64_t* stride, int batch, int seqlen, int heads, int dim) {
  const int64_t last = (batch - 1) * stride[0] + (seqlen - 1) * stride[1] + (heads - 1) * stride[2] + dim;
  const auto b = reinterpret_cast<uintptr_t>(ptr);
  return {b, b + static_cast<uintptr_t>(last * kElemBytes)};
}

bool overlaps(Range a, Range b) { return a.begin < b.end && b.begin < a.end; }

// Strides of one tensor: positive, 16-byte multiples, below the TMA limit, and small enough that the
// largest element offset does not overflow int64 (checked before any multiplication).
int check_strides(const char* name, const int64_t* s, const int extent[3]) {
  for (int i = 0; i < 3; ++i) {
    if (s[i] <= 0)
      return fail(XSTAGE_ERR_INVALID, "%s_stride[%d] (%s) = %lld must be positive", name, i, kDimName[i],
                  static_cast<long long>(s[i]));
    if (s[i] >= kTmaMaxStrideBytes / kElemBytes)
      return fail(XSTAGE_ERR_INVALID, "%s_stride[%d] (%s) = %lld elements is beyond the TMA limit of 2^40 bytes",
                  name, i, kDimName[i], static_cast<long long>(s[i]));
    if ((s[i] * kElemBytes) % kTmaAlign != 0)
      return fail(XSTAGE_ERR_INVALID,
                  "%s_stride[%d] (%s) = %lld elements is not a multiple of 16 bytes (8 elements), as TMA requires",
                  name, i, kDimName[i], static_cast<long long>(s[i]));
  }
  // Each term < 2^39 elements times an int extent < 2^31: each product < 2^70 could overflow, so bound
  // the sum in floating point first (exactness is not needed for a limit check).
  const double last = double(extent[0] - 1) * double(s[0]) + double(extent[1] - 1) * double(s[1]) +
                      double(extent[2] - 1) * double(s[2]);
  if (last * kElemBytes >= 0x1p62)
    return fail(XSTAGE_ERR_INVALID, "%s spans more than 2^62 bytes with these strides and shape", name);
  return XSTAGE_OK;
}

// The output must not write one element twice: sorted by stride, every dimension of extent > 1 must
// step over everything inside it (a sufficient condition for distinct (b, s, h) rows not to overlap).
int check_output_disjoint(const int64_t* s, const int extent[3], int head_dim) {
  int order[3] = {0, 1, 2};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      if (s[order[j]] < s[order[i]]) std::swap(order[i], order[j]);
  int64_t span = head_dim;  // elements covered by one row, then by each nested dimension
  for (int i = 0; i < 3; ++i) {
    const int d = order[i];
    if (extent[d] == 1) continue;
    if (s[d] < span)
      return fail(XSTAGE_ERR_INVALID,
                  "o_stride[%d] (%s) = %lld overlaps rows written by other (batch, seq, head) indices "
                  "(needs >= %lld)",
                  d, kDimName[d], static_cast<long long>(s[d]), static_cast<long long>(span));
    span = s[d] * extent[d];
  }
  return XSTAGE_OK;
}

// with_output = false: the output is not p->o (the peer-store path writes team buffers); o is not checked.
int check(const xstage_attn_fwd_params* p, bool with_output = true) {
  if (p == nullptr) return fail(XSTAGE_ERR_INVALID, "params is NULL");
  const struct {
    const char* name;
    const void* ptr;
  } ptrs[4] = {{"q", p->q}, {"k", p->k}, {"v", p->v}, {"o", p->o}};
  for (const auto& t : ptrs) {
    if (!with_output && &t == &ptrs[3]) continue;
    if (t.ptr == nullptr) return fail(XSTAGE_ERR_INVALID, "%s is NULL", t.name);
    if (reinterpret_cast<uintptr_t>(t.ptr) % kTmaAlign != 0)
      return fail(XSTAGE_ERR_INVALID, "%s = %p is not 16-byte aligned, as TMA requires", t.name, t.ptr);
  }
  if (p->lse != nullptr && reinterpret_cast<uintptr_t>(p->lse) % alignof(float) != 0)
    return fail(XSTAGE_ERR_INVALID, "lse = %p is not 4-byte aligned", static_cast<const void*>(p->lse));

  const struct {
    const char* name;
    int value;
  } dims[4] = {{"batch", p->batch}, {"seqlen_q", p->seqlen_q}, {"seqlen_kv", p->seqlen_kv}, {"heads", p->heads}};
  for (const auto& d : dims)
    if (d.value < 1) return fail(XSTAGE_ERR_INVALID, "%s = %d must be >= 1", d.name, d.value);
  if (p->head_dim < 1) return fail(XSTAGE_ERR_INVALID, "head_dim = %d must be >= 1", p->head_dim);
  if (p->head_dim != 64 && p->head_dim != 128)
    return fail(XSTAGE_ERR_UNSUPPORTED, "head_dim = %d is not supported (64 or 128)", p->head_dim);
  if (p->dtype != XSTAGE_DTYPE_BF16 && p->dtype != XSTAGE_DTYPE_FP16)
    return fail(XSTAGE_ERR_INVALID, "dtype = %d is not an xstage_dtype (0 = bf16, 1 = fp16)", p->dtype);
  if (p->causal != 0 && p->causal != 1)
    return fail(XSTAGE_ERR_INVALID, "causal = %d must be 0 or 1", p->causal);
  if (!std::isfinite(p->softmax_scale))
    return fail(XSTAGE_ERR_INVALID, "softmax_scale = %g must be finite (<= 0 selects 1/sqrt(head_dim))",
                static_cast<double>(p->softmax_scale));
  const int64_t rows_q = int64_t{p->batch} * p->heads * p->seqlen_q;
  const int64_t rows_kv = int64_t{p->batch} * p->heads * p->seqlen_kv;
  if (rows_q > kMaxRows)
    return fail(XSTAGE_ERR_INVALID, "batch*heads*seqlen_q = %d*%d*%d = %lld exceeds 2^31-1", p->batch, p->heads,
                p->seqlen_q, static_cast<long long>(rows_q));
  if (rows_kv > kMaxRows)
    return fail(XSTAGE_ERR_INVALID, "batch*heads*seqlen_kv = %d*%d*%d = %lld exceeds 2^31-1", p->batch, p->heads,
                p->seqlen_kv, static_cast<long long>(rows_kv));

  const int ext_q[3] = {p->batch, p->seqlen_q, p->heads};
  const int ext_kv[3] = {p->batch, p->seqlen_kv, p->heads};
  if (int rc = check_strides("q", p->q_stride, ext_q)) return rc;
  if (int rc = check_strides("k", p->k_stride, ext_kv)) return rc;
  if (int rc = check_strides("v", p->v_stride, ext_kv)) return rc;
  if (!with_output) return XSTAGE_OK;
  if (int rc = check_strides("o", p->o_stride, ext_q)) return rc;
  if (int rc = check_output_disjoint(p->o_stride, ext_q, p->head_dim)) return rc;

  // Outputs must not alias inputs (other CTAs still read q/k/v while o and lse are written).
  const Range rq = range_of(p->q, p->q_stride, p->batch, p->seqlen_q, p->heads, p->head_dim);
  const Range rk = range_of(p->k, p->k_stride, p->batch, p->seqlen_kv, p->heads, p->head_dim);
  const Range rv = range_of(p->v, p->v_stride, p->batch, p->seqlen_kv, p->heads, p->head_dim);
  const Range ro = range_of(p->o, p->o_stride, p->batch, p->seqlen_q, p->heads, p->head_dim);
  const struct {
    const char* name;
    Range r;
  } inputs[3] = {{"q", rq}, {"k", rk}, {"v", rv}};
  for (const auto& in : inputs)
    if (overlaps(ro, in.r)) return fail(XSTAGE_ERR_INVALID, "o overlaps %s in memory (o must not alias an input)", in.name);
  if (p->lse != nullptr) {
    const auto b = reinterpret_cast<uintptr_t>(p->lse);
    const Range rl{b, b + static_cast<uintptr_t>(rows_q) * sizeof(float)};
    for (const auto& in : inputs)
      if (overlaps(rl, in.r)) return fail(XSTAGE_ERR_INVALID, "lse overlaps %s in memory", in.name);
    if (overlaps(rl, ro)) return fail(XSTAGE_ERR_INVALID, "lse overlaps o in memory");
  }
  return XSTAGE_OK;
}

}  // namespace

namespace xstage::attention::capi {
int set_error(int code, const std::string& message) {
  g_last_error = message;
  return code;
}
void clear_error() { g_last_error.clear(); }
int cuda_fail(const char* what, cudaError_t e) {
  return fail(XSTAGE_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
int check_params(const xstage_attn_fwd_params* params, bool with_output) { return check(params, with_output); }
int check_device() {
  int dev = 0, major = 0, minor = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return cuda_fail("cudaGetDevice", e);
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev); e != cudaSuccess)
    return cuda_fail("cudaDeviceGetAttribute", e);
  if (cudaError_t e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev); e != cudaSuccess)
    return cuda_fail("cudaDeviceGetAttribute", e);
  if (major != 9 || minor != 0) {
    cudaDeviceProp prop{};
    const char* name = cudaGetDeviceProperties(&prop, dev) == cudaSuccess ? prop.name : "unknown device";
    return fail(XSTAGE_ERR_UNSUPPORTED, "device %d (%s) has compute capability %d.%d; the kernel needs 9.0 (sm_90a)",
                dev, name, major, minor);
  }
  return XSTAGE_OK;
}
}  // namespace xstage::attention::capi

using xstage::attention::capi::cuda_fail;

extern "C" int xstage_attn_fwd_check(const xstage_attn_fwd_params* params) {
  const int rc = check(params);
  if (rc == XSTAGE_OK) g_last_error.clear();
  return rc;
}

extern "C" int xstage_attn_fwd(const xstage_attn_fwd_params* params, void* stream) {
  if (int rc = check(params)) return rc;
  if (int rc = xstage::attention::capi::check_device()) return rc;
  const cudaError_t e = xstage::attention::run_fwd_sm90(*params, static_cast<cudaStream_t>(stream));
  if (e == cudaErrorNotSupported)  // the kernel's way to say "this variant is not built"
    return fail(XSTAGE_ERR_UNSUPPORTED, "the sm90 kernel does not support this variant (dtype = %d, head_dim = %d, "
                "causal = %d): %s", params->dtype, params->head_dim, params->causal,
                cudaGetErrorString(e));
  if (e != cudaSuccess) return cuda_fail("sm90 attention forward", e);
  g_last_error.clear();
  return XSTAGE_OK;
}

extern "C" const char* xstage_last_error(void) { return g_last_error.c_str(); }

extern "C" const char* xstage_version(void) {
  static const std::string line = xstage::version_line();  // built once; the pointer stays valid
  return line.c_str();
}
