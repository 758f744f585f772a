#pragma once
// Writes a file through a sibling temp file and a rename, so a failure leaves nothing half-written.
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "xstage/common/error.hpp"

namespace xstage {

// `write(std::ostream&)` fills the file; `what` names it in errors ("platform file", "sample file").
template <class Write>
void write_file_atomic(const std::string& path, const char* what, Write&& write) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    XSTAGE_REQUIRE(out, "cannot write ", what, " '", path, "'");
    write(out);
    out.close();
    XSTAGE_REQUIRE(out, "cannot write ", what, " '", path, "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw UsageError("cannot write " + std::string(what) + " '" + path + "'");
  }
}

}  // namespace xstage
