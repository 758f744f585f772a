// xstage: the command-line front end. Each area registers its own subcommands; this file only
// owns argument parsing, error reporting and exit codes (0 ok, 1 runtime failure, 2 bad input).
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "xstage/common/error.hpp"

namespace {
// An empty value ("--head-dim ''") converts to 0 in CLI11 and would be reported as "got 0", which the user never
// wrote: every named option that takes a value refuses it by name ("--head-dim: empty value"). Positionals are
// left alone (`xstage launch -- cmd ''` passes an empty argument on).
void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty([](std::string& s) { return s.empty() ? std::string("empty value") : std::string(); },
                                 "", "non-empty");
  for (CLI::Option* o : app.get_options())
    if (o->nonpositional() && o->get_type_size_max() > 0) o->check(non_empty);
  for (CLI::App* sub : app.get_subcommands({})) refuse_empty_values(*sub);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xstage: the X-Stage (Burst-Gap) model, calibration and kernels for remote-store "
               "communication-computation overlap"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>(xstage::cli::version_text),
                       "Print the version, git revision and CUDA / NCCL versions, and exit");
  xstage::cli::register_model_commands(app);
  xstage::cli::register_sim_commands(app);
  xstage::cli::register_gpu_commands(app);
  refuse_empty_values(app);
  try {
    // A word where a subcommand is required must name one (CLI11 would only say "A subcommand is required").
    CLI::App* cur = &app;
    for (int i = 1; i < argc && cur->get_require_subcommand_min() > 0; ++i) {
      const std::string w = argv[i];
      if (!w.empty() && w[0] == '-') break;
      CLI::App* sub = nullptr;
      std::string names;
      for (CLI::App* a : cur->get_subcommands({})) {
        names += (names.empty() ? "" : ", ") + a->get_name();
        if (a->check_name(w)) sub = a;
      }
      if (!sub) {
        const std::string where = cur == &app ? "xstage" : "xstage ... " + cur->get_name();
        throw xstage::UsageError("unknown command '" + w + "' for " + where + " (commands: " + names + ")");
      }
      cur = sub;
    }
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
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
