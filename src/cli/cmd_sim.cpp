#include "commands.hpp"
namespace xstage::cli {
void register_sim_commands(CLI::App&) {}
}  // namespace xstage::cli
