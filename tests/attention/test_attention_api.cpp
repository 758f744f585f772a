// CPU tests of the attention C ABI's validation: every error path returns its code and a message
// naming the bad value; valid parameters pass. xstage_attn_fwd_check needs no device, and neither
// does xstage_attn_fwd when the parameters are invalid (it validates before touching CUDA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>

#include "xstage/attention.h"

namespace {

// Fake device addresses: validation never dereferences them, only checks alignment and overlap.
constexpr uintptr_t kQ = 0x10000000, kK = 0x20000000, kV = 0x30000000, kO = 0x40000000, kLse = 0x50000000;

const void* addr(uintptr_t a) { return reinterpret_cast<const void*>(a); }

// Contiguous (batch, seq, heads, dim) tensors, 2 x 1000 x 12 x 128, bf16, LSE on.
xstage_attn_fwd_params valid() {
  xstage_attn_fwd_params p{};
  p.q = addr(kQ);
  p.k = addr(kK);
  p.v = addr(kV);
  p.o = const_cast<void*>(addr(kO));
  p.lse = static_cast<float*>(const_cast<void*>(addr(kLse)));
  p.batch = 2;
  p.seqlen_q = 1000;
  p.seqlen_kv = 1000;
  p.heads = 12;
  p.head_dim = 128;
  for (int64_t* s : {p.q_stride, p.k_stride, p.v_stride, p.o_stride}) {
    s[2] = 128;
    s[1] = 12 * 128;
    s[0] = 1000 * 12 * 128;
  }
  p.softmax_scale = 0.f;
  p.causal = 0;
  p.dtype = XSTAGE_DTYPE_BF16;
  return p;
}

// Asserts the code and that the message contains every fragment (the bad value and its name).
void expect_error(const xstage_attn_fwd_params& p, int code, std::initializer_list<const char*> fragments) {
  EXPECT_EQ(xstage_attn_fwd_check(&p), code);
  const std::string msg = xstage_last_error();
  for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message '" << msg << "' lacks '" << f << "'";
  // xstage_attn_fwd validates first, so the same code and no device access.
  EXPECT_EQ(xstage_attn_fwd(&p, nullptr), code);
  EXPECT_EQ(std::string(xstage_last_error()), msg);
}

TEST(attention_api, ValidParamsPass) {
  auto p = valid();
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_OK) << xstage_last_error();
  EXPECT_STREQ(xstage_last_error(), "");
}

TEST(attention_api, ValidVariantsPass) {
  auto p = valid();
  p.lse = nullptr;
  p.head_dim = 64;
  p.dtype = XSTAGE_DTYPE_FP16;
  p.causal = 1;
  p.softmax_scale = 0.3f;
  p.seqlen_q = 1;
  p.seqlen_kv = 8191;
  for (int64_t* s : {p.k_stride, p.v_stride}) s[0] = 8191 * 12 * 128;
  p.q_stride[0] = p.o_stride[0] = 12 * 128;
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_OK) << xstage_last_error();
  // (batch, heads, seq, dim) storage: the seq stride is smaller than the head stride.
  auto t = valid();
  for (int64_t* s : {t.q_stride, t.k_stride, t.v_stride, t.o_stride}) {
    s[1] = 128;
    s[2] = 1000 * 128;
  }
  EXPECT_EQ(xstage_attn_fwd_check(&t), XSTAGE_OK) << xstage_last_error();
  // q, k, v as views of one packed (batch, seq, 3, heads, dim) tensor: overlapping ranges are fine for inputs.
  auto k = valid();
  k.k = addr(kQ + 12 * 128 * 2);
  k.v = addr(kQ + 2 * 12 * 128 * 2);
  for (int64_t* s : {k.q_stride, k.k_stride, k.v_stride}) {
    s[1] = 3 * 12 * 128;
    s[0] = 1000 * 3 * 12 * 128;
  }
  EXPECT_EQ(xstage_attn_fwd_check(&k), XSTAGE_OK) << xstage_last_error();
}

TEST(attention_api, NullParams) {
  EXPECT_EQ(xstage_attn_fwd_check(nullptr), XSTAGE_ERR_INVALID);
  EXPECT_NE(std::string(xstage_last_error()).find("params is NULL"), std::string::npos);
  EXPECT_EQ(xstage_attn_fwd(nullptr, nullptr), XSTAGE_ERR_INVALID);
}

TEST(attention_api, NullPointers) {
  for (const char* which : {"q", "k", "v", "o"}) {
    auto p = valid();
    const std::string w = which;
    if (w == "q") p.q = nullptr;
    if (w == "k") p.k = nullptr;
    if (w == "v") p.v = nullptr;
    if (w == "o") p.o = nullptr;
    expect_error(p, XSTAGE_ERR_INVALID, {which, "NULL"});
  }
}

TEST(attention_api, MisalignedPointers) {
  for (const char* which : {"q", "k", "v", "o"}) {
    auto p = valid();
    const std::string w = which;
    if (w == "q") p.q = addr(kQ + 8);
    if (w == "k") p.k = addr(kK + 2);
    if (w == "v") p.v = addr(kV + 4);
    if (w == "o") p.o = const_cast<void*>(addr(kO + 8));
    expect_error(p, XSTAGE_ERR_INVALID, {which, "not 16-byte aligned"});
  }
  auto p = valid();
  p.lse = static_cast<float*>(const_cast<void*>(addr(kLse + 2)));
  expect_error(p, XSTAGE_ERR_INVALID, {"lse", "4-byte aligned"});
  p.lse = static_cast<float*>(const_cast<void*>(addr(kLse + 4)));  // 4-byte alignment suffices for lse
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_OK) << xstage_last_error();
}

TEST(attention_api, BadDims) {
  struct Case {
    const char* name;
    int value;
    int xstage_attn_fwd_params::* field;
  };
  for (Case c : {Case{"batch", 0, &xstage_attn_fwd_params::batch}, Case{"seqlen_q", 0, &xstage_attn_fwd_params::seqlen_q},
                 Case{"seqlen_kv", -5, &xstage_attn_fwd_params::seqlen_kv}, Case{"heads", 0, &xstage_attn_fwd_params::heads},
                 Case{"head_dim", 0, &xstage_attn_fwd_params::head_dim}}) {
    auto p = valid();
    p.*c.field = c.value;
    const std::string v = std::string(c.name) + " = " + std::to_string(c.value);
    expect_error(p, XSTAGE_ERR_INVALID, {v.c_str(), ">= 1"});
  }
}

TEST(attention_api, UnsupportedHeadDim) {
  for (int d : {32, 96, 256, 80}) {
    auto p = valid();
    p.head_dim = d;
    const std::string v = "head_dim = " + std::to_string(d) + " is not supported (64 or 128)";
    expect_error(p, XSTAGE_ERR_UNSUPPORTED, {v.c_str()});
  }
}

TEST(attention_api, BadDtypeCausalScale) {
  auto p = valid();
  for (int d : {7, -1, 2}) {  // any int a C caller may pass (the field is an int, so reading it is defined)
    p.dtype = d;
    const std::string v = "dtype = " + std::to_string(d) + " is not an xstage_dtype";
    expect_error(p, XSTAGE_ERR_INVALID, {v.c_str()});
  }
  p = valid();
  p.causal = 2;
  expect_error(p, XSTAGE_ERR_INVALID, {"causal = 2"});
  p = valid();
  p.softmax_scale = NAN;
  expect_error(p, XSTAGE_ERR_INVALID, {"softmax_scale = nan", "finite"});
  p.softmax_scale = INFINITY;
  expect_error(p, XSTAGE_ERR_INVALID, {"softmax_scale = inf"});
}

TEST(attention_api, BadStrides) {
  struct Case {
    const char* tensor;
    int dim;
    int64_t value;
    const char* why;
  };
  for (Case c : {Case{"q", 0, 0, "must be positive"}, Case{"k", 1, -1536, "must be positive"},
                 Case{"v", 2, 0, "must be positive"}, Case{"q", 2, 132, "multiple of 16 bytes"},
                 Case{"o", 1, 1540, "multiple of 16 bytes"}, Case{"k", 0, 12 * 128 + 4, "multiple of 16 bytes"},
                 Case{"v", 0, int64_t{1} << 39, "TMA limit"}}) {
    auto p = valid();
    int64_t* s = c.tensor[0] == 'q' ? p.q_stride : c.tensor[0] == 'k' ? p.k_stride : c.tensor[0] == 'v' ? p.v_stride : p.o_stride;
    s[c.dim] = c.value;
    const std::string name = std::string(c.tensor) + "_stride[" + std::to_string(c.dim) + "]";
    const std::string val = "= " + std::to_string(c.value);
    expect_error(p, XSTAGE_ERR_INVALID, {name.c_str(), val.c_str(), c.why});
  }
}

TEST(attention_api, OverlappingOutputRows) {
  auto p = valid();
  p.o_stride[2] = 64;  // heads 64 elements apart but each row is 128 long
  expect_error(p, XSTAGE_ERR_INVALID, {"o_stride[2] (head) = 64", "overlaps"});
  p = valid();
  p.o_stride[1] = 256;  // seq steps over two of the 12 heads only
  expect_error(p, XSTAGE_ERR_INVALID, {"o_stride[1] (seq) = 256", "overlaps", ">= 1536"});
  // Extent-1 dimensions may have any stride: batch = 1 with a tiny batch stride is fine.
  p = valid();
  p.batch = 1;
  p.o_stride[0] = 8;
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_OK) << xstage_last_error();
}

TEST(attention_api, OutputAliasingInput) {
  auto p = valid();
  p.o = const_cast<void*>(p.k);
  expect_error(p, XSTAGE_ERR_INVALID, {"o overlaps k"});
  p = valid();
  p.o = const_cast<void*>(addr(kQ + 1000 * 12 * 128 * 2));  // starts inside q's second batch
  expect_error(p, XSTAGE_ERR_INVALID, {"o overlaps q"});
  p = valid();
  p.lse = static_cast<float*>(const_cast<void*>(addr(kO + 64)));
  expect_error(p, XSTAGE_ERR_INVALID, {"lse overlaps o"});
  // Adjacent, not overlapping: o right after v's last element.
  p = valid();
  p.o = const_cast<void*>(addr(kV + 2 * 1000 * 12 * 128 * 2));
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_OK) << xstage_last_error();
}

TEST(attention_api, SizeLimits) {
  auto p = valid();
  p.batch = 1;
  p.heads = 40;
  p.seqlen_q = 60000000;  // 40 * 6e7 rows overflow int32
  for (int64_t* s : {p.q_stride, p.o_stride}) s[0] = 8;
  expect_error(p, XSTAGE_ERR_INVALID, {"batch*heads*seqlen_q", "2400000000", "2^31-1"});
  p = valid();
  p.batch = 1;
  p.heads = 40;
  p.seqlen_kv = 60000000;
  for (int64_t* s : {p.k_stride, p.v_stride}) s[0] = 8;
  expect_error(p, XSTAGE_ERR_INVALID, {"batch*heads*seqlen_kv"});
}

TEST(attention_api, ErrorMessageIsPerThreadAndClearedOnSuccess) {
  auto p = valid();
  p.head_dim = 96;
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_ERR_UNSUPPORTED);
  const std::string mine = xstage_last_error();
  EXPECT_NE(mine, "");
  // Another thread sees none of this thread's message, and its own failure does not replace this one.
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = xstage_last_error();
    auto q = valid();
    q.batch = 0;
    (void)xstage_attn_fwd_check(&q);
    other_after = xstage_last_error();
  });
  t.join();
  EXPECT_EQ(other_before, "");
  EXPECT_NE(other_after, "");
  EXPECT_NE(other_after, mine);
  EXPECT_EQ(std::string(xstage_last_error()), mine);
  p = valid();
  EXPECT_EQ(xstage_attn_fwd_check(&p), XSTAGE_OK);
  EXPECT_STREQ(xstage_last_error(), "");
}

}  // namespace
