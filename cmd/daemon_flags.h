// expanse-daemon's command line: every flag, default and help text of the roles
// (--role controller|sampler), the SLURM hook entry points and the diagnostics commands, parsed
// with CLI11 into src/agent's option structs (agent/daemon_commands.h). The docs and the
// cluster tests name these flags; change them only together.
#ifndef EXPANSE_CMD_DAEMON_FLAGS_H_
#define EXPANSE_CMD_DAEMON_FLAGS_H_

#include <variant>

#include "agent/daemon_commands.h"
#include "agent/sampler_run.h"
#include "core/host.h"
#include "doctor/doctor_command.h"
#include "gpu/backend_select.h"

namespace expanse::cmd {

struct DaemonCommandLine {
  // What to run, in the order the command line is looked at: a subcommand wins over --role.
  enum class Command { kNone, kHook, kGpus, kSample, kDiagnostics, kPystack, kDoctor, kRole };
  Command command = Command::kNone;
  // The node flags; `hostname` is "" when --hostname was not given.
  agent::DaemonOptions node;
  agent::HookCommandOptions hook;
  gpu::BackendChoice gpus_backend;
  bool gpus_json = false;
  int gpus_repeat = 0;
  agent::SamplerRunOptions sample;
  agent::PystackCommandOptions pystack;
  // `doctor`: the node flags (--config, --shared-prefix, --state-dir, --env-file, --user,
  // --gres-conf) are copied in after parsing.
  doctor::DoctorCommandOptions doctor;
};

// The exit status for a command line that ends the process at once: --help and --version (0),
// a flag CLI11 or a duration check refuses (CLI11's status; always 0 for `hook`, which never
// fails a job).
struct ExitNow {
  int status = 0;
};

// Parses argv; --help and --version print to stdout, errors to stderr. The --config default
// is $EXPANSE_DAEMON_CONFIG (read through `host`) when set and not empty.
std::variant<DaemonCommandLine, ExitNow> ParseDaemonCommandLine(int argc, char** argv, Host& host);

}  // namespace expanse::cmd

#endif  // EXPANSE_CMD_DAEMON_FLAGS_H_
