// CPU tests of the MoE layer's C ABI (xstage/moe.h) where no device is needed: null handles and bad arguments
// return XSTAGE_ERR_INVALID with a message naming what is wrong, before anything touches CUDA. (The layer itself,
// through this ABI, is tested on a GPU by tests/moe_gpu/test_python_moe.py.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "xstage/moe.h"  // (and xstage/team.h)

namespace {

std::string last() { return xstage_last_error(); }

void* fake(uintptr_t a) { return reinterpret_cast<void*>(a); }  // never dereferenced on these paths

TEST(moe_api, NullHandles) {
  xstage_moe layer = reinterpret_cast<xstage_moe>(uintptr_t(0x1));
  EXPECT_EQ(xstage_moe_create(nullptr, 256, 256, 8, 2, 64, XSTAGE_MOE_W8A8, &layer), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "team is null");
  EXPECT_EQ(layer, nullptr) << "a failed create leaves *out null";
  int32_t idx[2] = {0, 1};
  const void* x[1] = {fake(0x1000)};
  const float* xs[1] = {nullptr};
  const float* w[1] = {nullptr};
  float* out[1] = {nullptr};
  EXPECT_EQ(xstage_moe_forward(nullptr, nullptr, idx, x, xs, w, out, fake(0x2000), nullptr, fake(0x3000), nullptr,
                               XSTAGE_MOE_INTERLEAVED, nullptr),
            XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "layer is null");
  const int32_t* didx[1] = {idx};
  EXPECT_EQ(xstage_moe_forward_device(nullptr, nullptr, didx, x, xs, w, out, fake(0x2000), nullptr, fake(0x3000), nullptr,
                                      XSTAGE_MOE_INTERLEAVED, nullptr),
            XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "layer is null");
  EXPECT_EQ(xstage_moe_check(nullptr, nullptr, "x"), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "layer is null");
  int order = -1, lead = -1;
  EXPECT_EQ(xstage_moe_auto_order(nullptr, 0, 0, nullptr, &order, &lead, nullptr, 0), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "layer is null");
  EXPECT_EQ(order, -1) << "nothing written on an error";
  xstage_moe_destroy(nullptr);  // a no-op, as free(NULL)
}

TEST(moe_api, PackInt4ArgumentsNamed) {
  EXPECT_EQ(xstage_moe_pack_int4(nullptr, fake(0x1000), 1, 64, 128, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "twos / out is null");
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1000), fake(0x1000), 0, 64, 128, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "pack_int4: matrices, rows and K must be >= 1, got 0, 64, 128");
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1000), fake(0x1000), 1, 0, 128, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "pack_int4: matrices, rows and K must be >= 1, got 1, 0, 128");
  // 32 x 2^30 x 2^30 int4 weights: 2^64 bytes, a product that wraps to 0 (it returned OK, packing nothing)
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1000), fake(0x1000), 32, 1 << 30, 1 << 30, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_NE(last().find("32 matrices of 1073741824 x 1073741824"), std::string::npos) << last();
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1000), fake(0x1000), 2, 60, 128, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_NE(last().find("60"), std::string::npos) << last();
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1000), fake(0x1000), 2, 64, 100, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_NE(last().find("100"), std::string::npos) << last();
  // the kernels move 32-bit words: a misaligned pointer is refused (it was a device fault)
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1002), fake(0x1000), 2, 64, 128, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_NE(last().find("must be 4-byte aligned"), std::string::npos) << last();
  EXPECT_EQ(xstage_moe_pack_int4(fake(0x1000), fake(0x1001), 2, 64, 128, nullptr), XSTAGE_ERR_INVALID);
  EXPECT_NE(last().find("0x1001"), std::string::npos) << last();
}

TEST(moe_api, VersionNamesTheBuild) {  // the library's xstage_version() (attention.h)
  const std::string v = xstage_version();
  EXPECT_EQ(v.rfind("xstage ", 0), 0u) << v;
  EXPECT_NE(v.find(" (git "), std::string::npos) << v;
  EXPECT_EQ(v.back(), ')') << v;
}

TEST(moe_api, UniqueIdBufferNamed) {
  unsigned char id[XSTAGE_NCCL_ID_BYTES];
  EXPECT_EQ(xstage_nccl_unique_id(nullptr, XSTAGE_NCCL_ID_BYTES), XSTAGE_ERR_INVALID);
  EXPECT_EQ(last(), "the unique id's buffer is null");
  EXPECT_EQ(xstage_nccl_unique_id(id, XSTAGE_NCCL_ID_BYTES - 1), XSTAGE_ERR_INVALID);
  EXPECT_NE(last().find("got " + std::to_string(XSTAGE_NCCL_ID_BYTES - 1)), std::string::npos) << last();
}

}  // namespace
