// xstage: the command-line front end. Each area registers its own subcommands; this file only
// owns argument parsing, error reporting and exit codes (0 ok, 1 runtime failure, 2 bad input).
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "xstage/common/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"xstage: the X-Stage (Burst-Gap) model, calibration and kernels for remote-store "
               "communication-computation overlap"};
  app.require_subcommand(1);
  xstage::cli::register_model_commands(app);
  xstage::cli::register_sim_commands(app);
  xstage::cli::register_gpu_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "xstage: error: " << e.what() << "\n";
    return 2;
  } catch (const xstage::UsageError& e) {
    std::cerr << "xstage: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "xstage: failed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
