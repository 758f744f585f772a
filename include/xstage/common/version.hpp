#pragma once
// Which xstage this is: the project's version and the git revision the build came from, so a result file or a
// bug report names its build (`xstage --version`, the benchmarks' summary.json "software" object).
#include <string>

namespace xstage {

const char* version();       // project(VERSION) of CMakeLists.txt, e.g. "0.1.0"
const char* git_revision();  // 12 hex digits of HEAD at build time, "+dirty" with uncommitted changes; "unknown"
std::string version_line();  // "xstage 0.1.0 (git 0123456789ab)"

}  // namespace xstage
