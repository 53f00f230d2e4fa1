// expanse-daemon's commands, given their parsed options: the roles (--role controller|sampler),
// the SLURM hook entry points and the diagnostics commands. The command line itself (flags,
// defaults, help, exit statuses of a bad command line) is cmd/daemon_flags.cc's; what touches
// the machine goes through a Host (core/host.h), RealHost::Get() in the daemon.
//
// Each Run*Command returns the process's exit status.
#ifndef EXPANSE_AGENT_DAEMON_COMMANDS_H_
#define EXPANSE_AGENT_DAEMON_COMMANDS_H_

#include <chrono>
#include <optional>
#include <string>

#include "agent/job_events.h"
#include "agent/profiling_permissions.h"
#include "agent/runtime_settings.h"
#include "agent/sampler_run.h"
#include "core/host.h"
#include "deploy/daemon_config.h"
#include "gpu/backend_select.h"

namespace expanse::agent {

// The node flags every command shares.
struct DaemonOptions {
  std::string role;  // "controller", "sampler" or "" (a command instead)
  std::string config_path = deploy::kDefaultDaemonConfigPath;  // the controller's credential
  std::string shared_prefix;                                   // "" = none
  std::string hostname;  // this node's name; never "" (the main fills in the host name)
  std::string env_file = kDefaultDaemonEnvPath;
  std::string state_dir = "/var/lib/expanse";
  std::string events_dir = kDefaultEventsDir;
  std::string control_dir = kDefaultControlDir;
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::chrono::milliseconds slow_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds flush_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(30)};
  std::string user;       // the sampler's account, for the hooks' sampler bootstrap
  std::string gres_conf;  // "" = gres.conf beside $SLURM_CONF, else /etc/slurm/gres.conf
  gpu::BackendChoice backend;
};

// `expanse-daemon hook <kind>`.
struct HookCommandOptions {
  std::string kind;                // prolog | epilog | taskprolog
  std::string agent_library;       // an explicit agent path; "" = none
  bool inject_node_agent = false;  // this node's own agent under the shared prefix
  bool sampler_bootstrap = false;
  // The hook's deadline; nullopt = 5 s (taskprolog 2 s).
  std::optional<std::chrono::milliseconds> timeout;
};

// `expanse-daemon pystack`.
struct PystackCommandOptions {
  int pid = 0;
  std::string backend = "native";  // native | py-spy
  bool json = false;
};

// The node's gres.conf when no --gres-conf was given: beside $SLURM_CONF, else in /etc/slurm.
std::string DefaultGresConf(Host& host);

// Runs options.role until SIGTERM or SIGINT: 0 on a clean stop (and for a second sampler on
// the node, or a controller whose credential was replaced), 1 when the role cannot start.
int RunDaemonRole(const DaemonOptions& options, Host& host);

// Always 0, within the hook's deadline: a hook never fails a job.
int RunHookCommand(const HookCommandOptions& hook, const DaemonOptions& options, Host& host);

// What each collector is doing, or why not, and the effective runtime settings, as JSON on
// stdout. 0.
int RunDiagnosticsCommand(const DaemonOptions& options, Host& host);

// One sample of one process's Python stacks on stdout: 0, or 1 with the reason on stderr.
int RunPystackCommand(const PystackCommandOptions& pystack, const DaemonOptions& options,
                      Host& host);

// This node's GPUs as the daemon sees them. 0: no GPUs is a finding, not a failure.
int RunGpusCommand(const gpu::BackendChoice& choice, int repeat, bool json);

// The GPU sampler in the foreground, and what it cost. 0.
int RunSampleCommand(const SamplerRunOptions& options);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_DAEMON_COMMANDS_H_
