// `expanse compute install` and `compute uninstall`: their flags, as the guide names them and
// with its defaults (docs/install.md). Apart from expanse_cli.cc so that the parse is tested.

#ifndef EXPANSE_CMD_COMPUTE_CLI_H_
#define EXPANSE_CMD_COMPUTE_CLI_H_

#include <string>

#include <CLI/CLI.hpp>

#include "install/install_options.h"

namespace expanse::install {

struct ComputeCommands {
  CLI::App* install_command = nullptr;
  CLI::App* uninstall_command = nullptr;
  InstallOptions install;
  UninstallOptions uninstall;
  // As given; RunExpanseCli parses it into install.heartbeat_timeout.
  std::string heartbeat_timeout = "1m";
};

// Adds `install` and `uninstall` to the `compute` command; `commands` must outlive parsing.
void AddComputeCommands(CLI::App& compute, ComputeCommands& commands);

}  // namespace expanse::install

#endif  // EXPANSE_CMD_COMPUTE_CLI_H_
