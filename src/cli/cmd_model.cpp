#include "commands.hpp"
namespace xstage::cli {
void register_model_commands(CLI::App&) {}
}  // namespace xstage::cli
