#include "commands.hpp"
namespace xstage::cli {
void register_gpu_commands(CLI::App&) {}
}  // namespace xstage::cli
