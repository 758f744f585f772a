#pragma once
// Errors: one exception type for bad user input (the CLI maps it to exit code 2) and one check
// macro that names the offending value. Library code never prints and never exits.
#include <sstream>
#include <stdexcept>
#include <string>

namespace xstage {

// Bad input from the user: a wrong shape, an unknown platform, a malformed file.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Something failed that is not the user's fault (a CUDA/NCCL call, a timeout, a broken invariant).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace xstage

// XSTAGE_REQUIRE(cond, "K must be positive, got ", K): throws UsageError with the message.
#define XSTAGE_REQUIRE(cond, ...)                                        \
  do {                                                                   \
    if (!(cond)) throw ::xstage::UsageError(::xstage::detail::concat(__VA_ARGS__)); \
  } while (0)

// XSTAGE_CHECK(cond, ...): an internal invariant; throws RuntimeError.
#define XSTAGE_CHECK(cond, ...)                                          \
  do {                                                                   \
    if (!(cond)) throw ::xstage::RuntimeError(::xstage::detail::concat(__VA_ARGS__)); \
  } while (0)
