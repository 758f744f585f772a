// CPU tests of the Ulysses layer's shape check (what xstage_ulysses_create and the Layer constructor refuse
// before they allocate): each bad value is named, a valid shape passes at every world size that divides the heads.
#include <gtest/gtest.h>

#include <string>

#include "ulysses_layer.hpp"

namespace {

using xstage::ulysses::check_shape;
using xstage::ulysses::Shape;

Shape valid() { return Shape{2, 1024, 24, 128, XSTAGE_DTYPE_BF16, 0.f}; }

void expect_refused(const Shape& s, int world, const std::string& needle) {
  const std::string why = check_shape(s, world);
  EXPECT_NE(why.find(needle), std::string::npos) << "message: '" << why << "', expected it to name '" << needle << "'";
}

TEST(UlyssesShape, ValidShapesPass) {
  for (int world : {1, 2, 3, 4, 6, 8}) EXPECT_EQ(check_shape(valid(), world), "") << "world " << world;
  Shape s = valid();
  s.dtype = XSTAGE_DTYPE_FP16;
  s.head_dim = 64;
  EXPECT_EQ(check_shape(s, 8), "");
}

TEST(UlyssesShape, EachBadValueIsNamed) {
  for (int d : {7, -1, 2}) {  // any int a C caller passes: the field is an int, so reading it is defined
    Shape s = valid();
    s.dtype = d;
    expect_refused(s, 2, "dtype = " + std::to_string(d) + " is not an xstage_dtype");
  }
  Shape s = valid();
  s.batch = 0;
  expect_refused(s, 2, "batch = 0");
  s = valid();
  s.seq_per_rank = -3;
  expect_refused(s, 2, "seq_per_rank = -3");
  s = valid();
  s.head_dim = 96;
  expect_refused(s, 2, "head_dim = 96 is not supported");
  expect_refused(valid(), 5, "heads = 24 is not divisible by the world size 5");
  expect_refused(valid(), 16, "heads = 24 is not divisible by the world size 16");
  s = valid();
  s.seq_per_rank = 1 << 28;
  expect_refused(s, 8, "too large");
  s = valid();
  for (float bad : {__builtin_nanf(""), __builtin_inff(), -__builtin_inff()}) {
    s.softmax_scale = bad;
    expect_refused(s, 2, "must be finite");
  }
  for (float fine : {1e31f, -2.f, 0.125f}) {  // finite: taken (<= 0 selects 1 / sqrt(head_dim))
    s.softmax_scale = fine;
    EXPECT_EQ(check_shape(s, 2), "") << "softmax_scale " << fine;
  }
}

}  // namespace
