// `expanse doctor`: the operator's way to `expanse-daemon doctor` (src/doctor). The checks need
// the daemon's code (spool reports, capabilities), which the CLI does not link
// (architecture.install_links), so the CLI finds the installed daemon through the install
// state and runs it with the operator's arguments and the install's paths.

#ifndef EXPANSE_CMD_DOCTOR_CLI_H_
#define EXPANSE_CMD_DOCTOR_CLI_H_

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/result.h"
#include "install/install_state.h"

namespace expanse::install {

struct DoctorCli {
  CLI::App* command = nullptr;
  std::string daemon;                                  // --daemon; "" = the installed one
  std::string state_dir = "/var/lib/expanse-install";  // --install-state-dir
  std::vector<std::string> args;  // everything after the first unknown argument, as given
};

// Adds `doctor` to `app`; `cli` must outlive parsing.
void AddDoctorCommand(CLI::App& app, DoctorCli& cli);

// The daemon's argv: the daemon (--daemon, else <shared prefix>/bin/expanse-daemon of the
// controller's install state, else the sampler's), `doctor`, the install's --shared-prefix,
// --config, --user and --install-state unless the operator gave them, then the operator's
// arguments. kFailedPrecondition (reason "usage") when no daemon can be found.
Result<std::vector<std::string>> DoctorDaemonArgv(const DoctorCli& cli,
                                                  const std::optional<InstallState>& controller,
                                                  const std::optional<InstallState>& sampler);

// Runs it in place of this process (exec); returns only on failure: 2 with the reason.
int RunDoctorCli(DoctorCli cli);

}  // namespace expanse::install

#endif  // EXPANSE_CMD_DOCTOR_CLI_H_
