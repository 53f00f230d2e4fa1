#include "daemon_flags.h"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "core/duration.h"
#include "core/version.h"
#include "deploy/daemon_config.h"

namespace expanse::cmd {
namespace {

void AddBackendFlags(CLI::App& command, gpu::BackendChoice& choice) {
  command.add_option("--backend", choice.kind, "GPU backend: auto, nvml or nvidia-smi")
      ->check(CLI::IsMember({"auto", "nvml", "nvidia-smi"}))
      ->capture_default_str();
  command.add_option("--nvml-library", choice.nvml_library,
                     "Path of libnvidia-ml.so.1 (default: the dynamic loader's search)");
  command.add_option("--nvidia-smi", choice.nvidia_smi, "nvidia-smi program (name or path)")
      ->capture_default_str();
}

// A "30s"/"1m" flag value turned into milliseconds; throws CLI11's error naming the flag.
std::chrono::milliseconds Millis(const std::string& text, const char* flag) {
  Result<std::chrono::milliseconds> parsed = ParseDuration(text);
  if (!parsed.ok())
    throw CLI::ValidationError(flag, parsed.status().message());
  if (parsed->count() <= 0)
    throw CLI::ValidationError(flag, "must be positive");
  return *parsed;
}

// The duration flags as typed, so --help shows their defaults as an operator writes them.
struct DurationFlags {
  std::string interval = "1s";
  std::string slow_interval = "10s";
  std::string flush_interval = "10s";
  std::string heartbeat_interval = "30s";
};

}  // namespace

std::variant<DaemonCommandLine, ExitNow> ParseDaemonCommandLine(int argc, char** argv, Host& host) {
  DaemonCommandLine line;
  agent::DaemonOptions& flags = line.node;
  CLI::App app{"Expanse node daemon: samples GPUs and relays SLURM job telemetry.",
               "expanse-daemon"};
  app.set_version_flag("--version", "expanse-daemon " + VersionString(),
                       "Print the version and exit");
  app.require_subcommand(0, 1);
  // The node flags (--events-dir, --shared-prefix, ...) are the top-level app's; subcommands
  // such as `hook` take them after their own name too.
  app.fallthrough(true);

  DurationFlags durations;
  app.add_option("--role", flags.role,
                 "controller (unit expanse-daemon) or sampler (unit "
                 "expanse-sampler, on workers)")
      ->check(CLI::IsMember({"controller", "sampler"}));
  std::optional<std::string> config_env = host.GetEnv("EXPANSE_DAEMON_CONFIG");
  flags.config_path =
      config_env && !config_env->empty() ? *config_env : deploy::kDefaultDaemonConfigPath;
  app.add_option("--config", flags.config_path,
                 "Credential config (controller; default $EXPANSE_DAEMON_CONFIG or " +
                     std::string(deploy::kDefaultDaemonConfigPath) + ")");
  app.add_option("--shared-prefix", flags.shared_prefix,
                 "Directory shared by every node (binaries, worker spool)");
  app.add_option("--hostname", flags.hostname, "This node's name (default: the host name)");
  app.add_option("--env-file", flags.env_file, "Runtime settings file")->capture_default_str();
  app.add_option("--state-dir", flags.state_dir, "Node-local state directory")
      ->capture_default_str();
  app.add_option("--events-dir", flags.events_dir, "Node-local SLURM hook events")
      ->capture_default_str();
  app.add_option("--control-dir", flags.control_dir,
                 "Node-local control directory (profiling-agent disable marker)")
      ->capture_default_str();
  app.add_option("--interval", durations.interval, "GPU sampling interval")->capture_default_str();
  app.add_option("--slow-interval", durations.slow_interval,
                 "Interval of energy and per-process GPU readings")
      ->capture_default_str();
  app.add_option("--flush-interval", durations.flush_interval,
                 "How often samples are handed on (one spool file per worker per interval)")
      ->capture_default_str();
  app.add_option("--heartbeat-interval", durations.heartbeat_interval, "Controller heartbeats")
      ->capture_default_str();
  app.add_option("--gres-conf", flags.gres_conf,
                 "This node's gres.conf (default: beside $SLURM_CONF, else /etc/slurm)");
  app.add_option("--user", flags.user, "Account the sampler runs as (hooks' sampler bootstrap)");
  AddBackendFlags(app, flags.backend);

  std::string bootstrap = "off", hook_timeout;
  CLI::App* hook = app.add_subcommand("hook", "SLURM hook entry point (always exits 0)");
  hook->add_option("kind", line.hook.kind, "prolog, epilog or taskprolog")
      ->required()
      ->check(CLI::IsMember({"prolog", "epilog", "taskprolog"}));
  hook->add_option("--agent-library", line.hook.agent_library,
                   "TaskProlog: an in-process agent library to inject (overrides --inject-agent)");
  hook->add_flag(
      "--inject-agent", line.hook.inject_node_agent,
      "TaskProlog: inject this node's own capture agent, <shared-prefix>/lib/cupti-nodes/"
      "<hostname>/lib/libexpanse-agent.so, when the node has one");
  hook->add_option("--sampler-bootstrap", bootstrap,
                   "Prolog: prolog = start or update this node's sampler; off = do not")
      ->check(CLI::IsMember({"prolog", "off"}))
      ->capture_default_str();
  hook->add_option("--timeout", hook_timeout, "Deadline (default 5s; taskprolog 2s)");

  CLI::App* gpus = app.add_subcommand("gpus", "Show this node's GPUs as the daemon sees them");
  AddBackendFlags(*gpus, line.gpus_backend);
  gpus->add_flag("--json", line.gpus_json, "Print JSON");
  gpus->add_option("--repeat", line.gpus_repeat, "Also time each backend call this many times")
      ->check(CLI::Range(0, 100000));

  agent::SamplerRunOptions& run = line.sample;
  std::string duration = "30s", run_interval = "1s", run_slow = "10s";
  CLI::App* sample =
      app.add_subcommand("sample", "Run the GPU sampler in the foreground and report its cost");
  AddBackendFlags(*sample, run.backend);
  sample->add_option("--duration", duration, "How long to run (e.g. 30s, 5m)")
      ->capture_default_str();
  sample->add_option("--interval", run_interval, "Per-second readings interval")
      ->capture_default_str();
  sample
      ->add_option("--slow-interval", run_slow,
                   "Interval of energy and per-process utilisation readings")
      ->capture_default_str();
  sample->add_option("--host", run.host, "Host name put on the series")->capture_default_str();
  sample->add_option("--output", run.output,
                     "Append the rendered ingest batches (JSON lines) to this file");

  CLI::App* diagnostics = app.add_subcommand(
      "diagnostics", "What each collector is doing, or why not; effective runtime settings");

  CLI::App* pystack = app.add_subcommand(
      "pystack", "Print the Python stacks of one process, as the daemon would sample them");
  pystack->add_option("--pid", line.pystack.pid, "Process to read")
      ->required()
      ->check(CLI::PositiveNumber);
  pystack->add_option("--backend", line.pystack.backend, "native or py-spy")
      ->check(CLI::IsMember({"native", "py-spy"}))
      ->capture_default_str();
  pystack->add_flag("--json", line.pystack.json, "Print JSON");

  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Check the whole deployment from the controller (or one worker with --host) and print "
      "each finding with its fix; exit 0 nothing to do, 1 action needed, 2 could not run");
  doctor->add_option("--host", line.doctor.gather.target,
                     "Check only this worker, through its spool health report");
  doctor->add_flag("--json", line.doctor.json,
                   "Print the findings as JSON (docs/formats/doctor.md)");
  doctor->add_option("--slurm-conf", line.doctor.gather.slurm_conf,
                     "slurm.conf to check (default: the installer's, else as it discovers one)");
  doctor->add_option("--cgroup-conf", line.doctor.gather.cgroup_conf,
                     "cgroup.conf to check (default: beside slurm.conf)");
  doctor
      ->add_option("--install-state", line.doctor.gather.install_state,
                   "The controller install's state file")
      ->capture_default_str();
  doctor->add_flag("!--no-planes", line.doctor.probe_planes,
                   "Do not contact the control and data planes");

  try {
    app.parse(argc, argv);
    if (sample->parsed()) {
      run.duration = Millis(duration, "--duration");
      run.interval = Millis(run_interval, "--interval");
      run.slow_interval = Millis(run_slow, "--slow-interval");
    }
    if (!flags.role.empty()) {
      flags.interval = Millis(durations.interval, "--interval");
      flags.slow_interval = Millis(durations.slow_interval, "--slow-interval");
      flags.flush_interval = Millis(durations.flush_interval, "--flush-interval");
      flags.heartbeat_interval = Millis(durations.heartbeat_interval, "--heartbeat-interval");
    }
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    // A hook never fails a job, not even on a mistaken command line; doctor's usage errors
    // are 2, apart from its findings' 1.
    for (int i = 1; i < argc; ++i) {
      if (std::string_view(argv[i]) == "hook")
        return ExitNow{0};
      if (std::string_view(argv[i]) == "doctor")
        return ExitNow{status == 0 ? 0 : 2};
    }
    return ExitNow{status};
  }

  line.hook.sampler_bootstrap = bootstrap == "prolog";
  // A deadline that does not parse leaves the kind's default: the hook must run regardless.
  if (Result<std::chrono::milliseconds> parsed = ParseDuration(hook_timeout); parsed.ok())
    line.hook.timeout = *parsed;

  using Command = DaemonCommandLine::Command;
  if (hook->parsed())
    line.command = Command::kHook;
  else if (gpus->parsed())
    line.command = Command::kGpus;
  else if (sample->parsed())
    line.command = Command::kSample;
  else if (diagnostics->parsed())
    line.command = Command::kDiagnostics;
  else if (pystack->parsed())
    line.command = Command::kPystack;
  else if (doctor->parsed())
    line.command = Command::kDoctor;
  else if (!flags.role.empty())
    line.command = Command::kRole;
  if (line.command == Command::kDoctor) {
    doctor::GatherOptions& gather = line.doctor.gather;
    gather.config_path = flags.config_path;
    gather.shared_prefix = flags.shared_prefix;
    gather.state_dir = flags.state_dir;
    gather.user = flags.user;
    gather.gres_conf = flags.gres_conf;
    line.doctor.env_file = flags.env_file;
  }
  return line;
}

}  // namespace expanse::cmd
