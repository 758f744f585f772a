#pragma once
// --help and -h for the benchmarks and probes. A program's usage is its source's header comment: the build writes it
// as the string kUsage into <target>_usage.inc (cmake/usage_from_header.py, xstage_usage() in cmake/XstageCuda.cmake),
// so the file's header and --help are one text. The CPU test cpu.bench.usage checks that every flag a parser
// accepts is in it.
#include <cstdio>
#include <cstdlib>
#include <string>

namespace xstage::bench {

inline bool is_help_flag(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// The usage on stdout, then exit 0 (before any CUDA or NCCL work: the parsers run first).
[[noreturn]] inline void print_usage_and_exit(const char* usage) {
  std::fputs(usage, stdout);
  std::fflush(stdout);
  std::exit(0);
}

}  // namespace xstage::bench
