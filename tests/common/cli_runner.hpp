#pragma once
// Runs the built `xstage` binary (path in XSTAGE_BIN) for end-to-end CLI tests: exit code, stdout, stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace cli_test {

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline std::string tmp_path(const std::string& stem) {
  static int n = 0;  // unique within the process; the pid across processes
  return (std::filesystem::temp_directory_path() / (stem + std::to_string(::getpid()) + "_" + std::to_string(n++)))
      .string();
}

inline CliRun xstage(const std::string& args) {
  const std::string errf = tmp_path("xstage_cli_err_");
  const std::string cmd = std::string("'") + XSTAGE_BIN + "' " + args + " 2>'" + errf + "'";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errf);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(errf);
  return r;
}

// Bad input: exit code 2, nothing on stdout, exactly one line "xstage: error: ..." containing `needle`.
inline void expect_usage(const std::string& args, const std::string& needle) {
  SCOPED_TRACE(args);
  const CliRun r = xstage(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("xstage: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace cli_test
