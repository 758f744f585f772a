#include "xstage/common/version.hpp"

#include "xstage/version_info.h"  // generated at build time (cmake/version_info.cmake)

namespace xstage {

const char* version() { return XSTAGE_VERSION_STRING; }
const char* git_revision() { return XSTAGE_GIT_REVISION; }
std::string version_line() { return std::string("xstage ") + version() + " (git " + git_revision() + ")"; }

}  // namespace xstage
