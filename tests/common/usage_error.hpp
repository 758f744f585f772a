#pragma once
// The message of the UsageError that f() throws, or "" when it throws none: tests assert on the text a
// user would see.
#include <string>

#include "xstage/common/error.hpp"

namespace xstage::testing {

template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace xstage::testing
