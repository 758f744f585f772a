#pragma once
// Subcommand registration, one function per area. A subcommand's callback throws
// xstage::UsageError for bad input (exit 2) and anything else for a failure (exit 1).
#include <CLI/CLI.hpp>

#include <string>

namespace xstage::cli {
void register_model_commands(CLI::App& app);  // cmd_model.cpp: eval, design, fit, platform
void register_sim_commands(CLI::App& app);    // cmd_sim.cpp: simulate
void register_gpu_commands(CLI::App& app);    // cmd_gpu.cpp: calibrate, launch (needs CUDA)

// What `xstage --version` prints (cmd_gpu.cpp): the version and git revision; in a CUDA build also the CUDA and
// NCCL versions built with and loaded.
std::string version_text();

// A routing seed as the commands take it: a whole number in 0 .. 2^64-1 (UsageError naming `what` otherwise).
unsigned long long parse_seed(const std::string& text, const std::string& what);
}  // namespace xstage::cli
