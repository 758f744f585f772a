#pragma once
// Numbers as the CLI and the model's reasons print them: fixed digits, and a few units.
#include <iomanip>
#include <sstream>
#include <string>

namespace xstage {

// fmt(3.14159, 2) -> "3.14"
inline std::string fmt(double v, int digits = 2) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

namespace units {
inline std::string us(double seconds) { return fmt(seconds * 1e6, 2) + " us"; }
inline std::string mb(double bytes) { return fmt(bytes / 1e6, 2) + " MB"; }
inline std::string gbps(double bytes_per_s) { return fmt(bytes_per_s / 1e9, 1) + " GB/s"; }
}  // namespace units

}  // namespace xstage
