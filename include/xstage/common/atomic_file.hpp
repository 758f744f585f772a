#pragma once
// Writes a file through a temp file next to it and a rename, so a failure leaves nothing half-written
// and no temp file behind. A symlink is followed (its target is written, the link stays a link); an
// existing path that is not a regular file (a device, a folder, a FIFO) is refused.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "xstage/common/error.hpp"

namespace xstage {

// The file write_file_atomic(path, what, ...) would write (a symlink followed to its target), refused as it would
// refuse it, without writing anything: a command that writes several files checks them all first, so that one refused
// file does not leave the others new beside old ones.
inline std::filesystem::path writable_target(const std::string& path, const char* what) {
  namespace fs = std::filesystem;
  XSTAGE_REQUIRE(!path.empty(), "cannot write ", what, ": empty file name");
  std::error_code ec;
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {  // follow the chain, dangling too
    XSTAGE_REQUIRE(hops < 40, "cannot write ", what, " '", path, "': too many levels of symlinks");
    const fs::path next = fs::read_symlink(target, ec);
    XSTAGE_REQUIRE(!ec, "cannot write ", what, " '", path, "': cannot read the symlink (", ec.message(), ")");
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const fs::file_status st = fs::status(target, ec);
  XSTAGE_REQUIRE(!fs::exists(st) || fs::is_regular_file(st), "cannot write ", what, " '", path, "': ",
                 fs::is_directory(st) ? "it is a folder" : "it exists and is not a regular file", " (",
                 target.string(), ")");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  XSTAGE_REQUIRE(fs::is_directory(dir, ec), "cannot write ", what, " '", path, "': folder '", dir.string(),
                 "' does not exist");
  return target;
}

// `write(std::ostream&)` fills the file; `what` names it in errors ("platform file", "sample file").
template <class Write>
void write_file_atomic(const std::string& path, const char* what, Write&& write) {
  namespace fs = std::filesystem;
  const fs::path target = writable_target(path, what);
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp = target.string() + ".tmp" + std::to_string(::getpid());
  auto fail = [&](const std::string& why) {
    std::error_code rm;
    fs::remove(tmp, rm);
    throw UsageError("cannot write " + std::string(what) + " '" + path + "': " + why);
  };
  {
    std::ofstream out(tmp);
    if (!out) fail("cannot create a file in '" + dir.string() + "'");
    try {
      write(out);
    } catch (...) {
      out.close();
      std::error_code rm;
      fs::remove(tmp, rm);
      throw;
    }
    out.flush();
    out.close();
    if (!out) fail("write failed (disk full?)");
  }
  if (fs::exists(st)) fs::permissions(tmp, fs::status(target, ec).permissions(), ec);  // keep the mode
  fs::rename(tmp, target, ec);
  if (ec) fail(ec.message());
}

}  // namespace xstage
