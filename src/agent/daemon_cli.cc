#include "agent/daemon_cli.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "agent/capabilities.h"
#include "agent/controller_role.h"
#include "agent/gpu_report.h"
#include "agent/hook.h"
#include "agent/job_events.h"
#include "agent/profiling_permissions.h"
#include "agent/run_history.h"
#include "agent/runtime_settings.h"
#include "agent/sampler_bootstrap.h"
#include "agent/sampler_role.h"
#include "agent/sampler_run.h"
#include "core/duration.h"
#include "core/version.h"
#include "deploy/daemon_config.h"
#include "pystack/native_reader.h"
#include "pystack/pyspy_source.h"

extern char** environ;

namespace expanse::agent {
namespace {

std::atomic<bool> g_stop{false};
void RequestStop(int /*signal*/) { g_stop = true; }

void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = RequestStop;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

void Log(const std::string& line) { std::fprintf(stderr, "expanse-daemon: %s\n", line.c_str()); }

std::string Hostname() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string host = name;
  if (size_t dot = host.find('.'); dot != std::string::npos)
    host.resize(dot);
  return host;
}

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

struct RoleFlags {
  std::string role;
  std::string config_path;
  std::string shared_prefix;
  std::string hostname;
  std::string env_file = kDefaultDaemonEnvPath;
  std::string state_dir = "/var/lib/expanse";
  std::string events_dir = kDefaultEventsDir;
  std::string control_dir = kDefaultControlDir;
  std::string interval = "1s";
  std::string slow_interval = "10s";
  std::string flush_interval = "10s";
  std::string heartbeat_interval = "30s";
  std::string user;
  std::string gres_conf;
  gpu::BackendChoice backend;
};

// gres.conf beside slurm.conf: $SLURM_CONF's directory, else /etc/slurm.
std::string DefaultGresConf() {
  const char* conf = std::getenv("SLURM_CONF");
  std::string dir = "/etc/slurm";
  if (conf != nullptr && *conf != '\0') {
    dir = conf;
    const size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  }
  return dir + "/gres.conf";
}

// The GPU backend the flags choose, with daemon.env's EXPANSE_NVML_LIBRARY where no
// --nvml-library was given.
gpu::BackendChoice EffectiveBackend(const gpu::BackendChoice& flags,
                                    const RuntimeSettings& settings) {
  gpu::BackendChoice backend = flags;
  if (backend.nvml_library.empty())
    backend.nvml_library = settings.nvml_library;
  return backend;
}

int RunRole(const RoleFlags& flags) {
  Result<RuntimeSettings> settings = LoadRuntimeSettings(flags.env_file, environ);
  if (!settings.ok()) {
    Log(settings.status().message());
    return 1;
  }
  for (const std::string& key : settings->unknown_keys)
    Log("unknown setting " + key);
  // The operator's opt-out must hold before anything else: failing to publish it is fatal.
  if (Status marker = PublishDisableMarker(flags.control_dir, !settings->profiling_agent_enable);
      !marker.ok()) {
    Log(marker.message());
    return 1;
  }
  InstallStopHandlers();
  SystemClock clock;
  NodeCollectorOptions node;
  node.hostname = flags.hostname.empty() ? Hostname() : flags.hostname;
  node.backend = EffectiveBackend(flags.backend, *settings);
  node.events_dir = flags.events_dir;
  node.gres_conf_path = flags.gres_conf.empty() ? DefaultGresConf() : flags.gres_conf;
  PyStacksOptions stacks;
  stacks.hostname = node.hostname;
  stacks.settings = *settings;
  stacks.prefix_bin = flags.shared_prefix.empty() ? "" : flags.shared_prefix + "/bin";
  const char* path = std::getenv("PATH");
  stacks.path_env = path ? path : "/usr/bin:/bin";
  stacks.log = Log;
  node.py_stacks = stacks;

  if (flags.role == "sampler") {
    SamplerRoleOptions options;
    options.node = node;
    options.node.allocations_file = flags.state_dir + "/sampler/open-allocations.json";
    options.shared_prefix = flags.shared_prefix;
    options.state_dir = flags.state_dir + "/sampler";
    options.interval = Millis(flags.interval, "--interval");
    options.slow_interval = Millis(flags.slow_interval, "--slow-interval");
    options.flush_interval = Millis(flags.flush_interval, "--flush-interval");
    options.settings = *settings;
    options.control_dir = flags.control_dir;
    options.daemon_version = VersionString();
    options.log = Log;
    // One sampler per node: a second one (a Prolog bootstrap racing a unit) exits quietly.
    Result<std::string> identity = BinaryIdentity("/proc/self/exe");
    Result<SamplerInstanceLock> lock =
        SamplerInstanceLock::Acquire(options.state_dir, identity.ok() ? *identity : "unknown");
    if (!lock.ok()) {
      if (lock.status().reason() == "sampler_running")
        return 0;
      Log(lock.status().message());
      return 1;
    }
    Log("sampler starting on " + node.hostname + ", spool " + WorkerSpoolRoot(flags.shared_prefix));
    const Status status = RunSamplerRole(options, clock, g_stop);
    if (!status.ok()) {
      Log(status.message());
      return 1;
    }
    return 0;
  }

  ControllerOptions options;
  options.node = node;
  options.node.allocations_file = flags.state_dir + "/open-allocations.json";
  options.config_path = flags.config_path;
  options.state_dir = flags.state_dir;
  options.interval = Millis(flags.interval, "--interval");
  options.slow_interval = Millis(flags.slow_interval, "--slow-interval");
  options.flush_interval = Millis(flags.flush_interval, "--flush-interval");
  options.heartbeat_interval = Millis(flags.heartbeat_interval, "--heartbeat-interval");
  options.settings = *settings;
  options.control_dir = flags.control_dir;
  options.shared_prefix_override = flags.shared_prefix;
  options.daemon_version = VersionString();
  options.log = Log;
  // A crash must leave its reason for the next start to report (run_history.h).
  InstallFatalRecorder(options.state_dir);
  const Status status = RunControllerRole(options, clock, g_stop);
  if (!status.ok()) {
    Log(status.message());
    return status.reason() == "credential_revoked" ? 0 : 1;
  }
  return 0;
}

int RunHookCommand(const std::string& kind, const RoleFlags& flags,
                   const std::string& agent_library, const std::string& bootstrap,
                   const std::string& timeout) {
  // Whatever happens below, the hook ends with status 0 within its deadline.
  std::chrono::milliseconds deadline{kind == "taskprolog" ? 2000 : 5000};
  if (Result<std::chrono::milliseconds> parsed = ParseDuration(timeout); parsed.ok()) {
    deadline = *parsed;
  }
  ArmHookDeadline(deadline);
  HookOptions options;
  options.kind = kind;
  options.events_dir = flags.events_dir;
  options.control_dir = flags.control_dir;
  options.agent_library = agent_library;
  options.hostname = flags.hostname.empty() ? Hostname() : flags.hostname;
  options.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (kind == "prolog" && bootstrap == "prolog" && !flags.shared_prefix.empty()) {
    options.bootstrap_sampler = [&] {
      BootstrapOptions b;
      b.binary = flags.shared_prefix + "/bin/expanse-daemon";
      b.sampler_args = {"--role",       "sampler",        "--shared-prefix", flags.shared_prefix,
                        "--hostname",   options.hostname, "--state-dir",     flags.state_dir,
                        "--events-dir", flags.events_dir, "--control-dir",   flags.control_dir,
                        "--env-file",   flags.env_file};
      if (!flags.gres_conf.empty()) {
        b.sampler_args.insert(b.sampler_args.end(), {"--gres-conf", flags.gres_conf});
      }
      if (!flags.backend.nvml_library.empty()) {
        b.sampler_args.insert(b.sampler_args.end(), {"--nvml-library", flags.backend.nvml_library});
      }
      b.state_dir = flags.state_dir + "/sampler";
      b.user = flags.user;
      b.log_file = flags.state_dir + "/sampler.log";
      b.shared_prefix = flags.shared_prefix;
      b.hostname = options.hostname;
      StartSamplerDetached(b);
    };
  }
  SystemClock clock;
  const std::string out = RunHook(options, EnvironmentMap(environ), clock);
  // The events directory belongs to the daemon user, who collects and deletes the events.
  if (!flags.user.empty()) {
    if (passwd* pw = getpwnam(flags.user.c_str())) {
      (void)chown(flags.events_dir.c_str(), pw->pw_uid, pw->pw_gid);
    }
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

int RunDiagnostics(const RoleFlags& flags) {
  nlohmann::json out;
  Result<RuntimeSettings> settings = LoadRuntimeSettings(flags.env_file, environ);
  if (!settings.ok()) {
    out["settings_error"] = settings.status().message();
    settings = RuntimeSettings{};
  }
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [key, source] : settings->sources)
    sources[key] = source;
  out["settings"] = {
      {"EXPANSE_CUPTI_ENABLE", settings->cupti_enable ? "1" : "0"},
      {"EXPANSE_CUPTI_HELPER", settings->cupti_helper},
      {"EXPANSE_PROFILING_ENABLE", settings->profiling_enable ? "1" : "0"},
      {"EXPANSE_PROFILING_AGENT_ENABLE", settings->profiling_agent_enable ? "1" : "0"},
      {"EXPANSE_PYSPY", settings->pyspy},
      {"EXPANSE_PYSTACKS_ENABLE", settings->pystacks_enable ? "1" : "0"},
      {"EXPANSE_PYSTACKS_BACKEND", settings->pystacks_backend},
      {"EXPANSE_PYSTACKS_HZ", settings->pystacks_hz},
      {"EXPANSE_PYSTACKS_BURST_HZ", settings->pystacks_burst_hz},
      {"EXPANSE_PYSTACKS_BURST_SECONDS", settings->pystacks_burst_seconds},
      {"EXPANSE_PYSTACKS_CPU_PERCENT", settings->pystacks_cpu_percent},
      {"EXPANSE_PYSTACKS_WINDOW_SECONDS", settings->pystacks_window_seconds},
      {"EXPANSE_DCGMI", settings->dcgmi},
      {"EXPANSE_DCGM_HOST", settings->dcgm_host},
      {"EXPANSE_SEGMENT_UPLOAD_MODE", settings->segment_upload_mode},
      {"HTTPS_PROXY", settings->https_proxy},
      {"NO_PROXY", settings->no_proxy},
      {"SSL_CERT_FILE", settings->ssl_cert_file},
      {"EXPANSE_NVML_LIBRARY", settings->nvml_library},
      {"sources", sources},
      {"unknown_keys", settings->unknown_keys}};
  const nlohmann::json gpus = GpuReport(EffectiveBackend(flags.backend, *settings), 0);
  CapabilityInputs inputs;
  inputs.settings = *settings;
  inputs.gpu.backend = gpus["backend"].is_string() ? gpus["backend"].get<std::string>() : "";
  inputs.gpu.state = gpus.value("state", "no_gpus");
  inputs.gpu.detail = gpus.value("detail", "");
  if (gpus.contains("inventory") && gpus["inventory"].contains("gpus")) {
    inputs.gpu.gpus = gpus["inventory"]["gpus"].size();
  }
  inputs.shared_prefix = flags.shared_prefix;
  inputs.hostname = flags.hostname.empty() ? Hostname() : flags.hostname;
  const char* path = std::getenv("PATH");
  inputs.path_env = path ? path : "";
  if (settings->profiling_agent_enable) {
    PermissionCheckOptions check;
    check.control_dir = flags.control_dir;
    check.shared_prefix = flags.shared_prefix;
    inputs.profiling_permissions_problem = CheckProfilingPermissions(check).problem;
  }
  out["capabilities"] = CapabilitiesJson(DescribeCapabilities(inputs));
  out["gpus"] = gpus;
  std::cout << out.dump(2) << "\n";
  return 0;
}

// One sample of one process: what the stack collector would fold. Exit 0 with the stacks, 1
// with the reason (e.g. "py_stacks: ptrace denied for pid 7: ...").
int RunPystackDump(const RoleFlags& flags, int pid, const std::string& backend, bool json) {
  Result<RuntimeSettings> settings = LoadRuntimeSettings(flags.env_file, environ);
  if (!settings.ok()) {
    Log(settings.status().message());
    return 1;
  }
  std::unique_ptr<pystack::StackSource> source;
  if (backend == "py-spy") {
    const char* path = std::getenv("PATH");
    Result<std::string> pyspy = pystack::FindPyspy(
        settings->pyspy, flags.shared_prefix.empty() ? "" : flags.shared_prefix + "/bin", path);
    if (!pyspy.ok() || pyspy->empty()) {
      Log(pyspy.ok() ? "no py-spy found (bundled copy, EXPANSE_PYSPY or PATH)"
                     : pyspy.status().message());
      return 1;
    }
    pystack::PyspyOptions options;
    options.binary = *pyspy;
    source = std::make_unique<pystack::PyspySource>(options);
  } else {
    source = pystack::MakeNativeReader();
  }
  Result<pystack::ProcessStacks> stacks = source->Sample(static_cast<pid_t>(pid));
  if (!stacks.ok()) {
    Log(stacks.status().message());
    return 1;
  }
  if (json) {
    nlohmann::json threads = nlohmann::json::array();
    for (const pystack::ThreadStack& t : stacks->threads) {
      nlohmann::json frames = nlohmann::json::array();
      for (const pystack::Frame& f : t.frames)
        frames.push_back({{"file", f.file}, {"function", f.function}, {"line", f.line}});
      threads.push_back(
          {{"tid", t.tid}, {"state", pystack::ThreadStateName(t.state)}, {"frames", frames}});
    }
    std::cout << nlohmann::json{{"pid", stacks->pid},
                                {"python_version", stacks->python_version},
                                {"backend", source->Name()},
                                {"threads", threads}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "pid " << stacks->pid << ", Python " << stacks->python_version << " ("
            << source->Name() << ")\n";
  for (const pystack::ThreadStack& t : stacks->threads) {
    const char* state = pystack::ThreadStateName(t.state);
    std::cout << "thread " << t.tid << (*state ? std::string(" (") + state + ")" : "") << "\n";
    for (auto f = t.frames.rbegin(); f != t.frames.rend(); ++f)  // leaf first, as Python prints
      std::cout << "    " << f->function << " (" << f->file << ":" << f->line << ")\n";
  }
  return 0;
}

}  // namespace

int RunDaemonCli(int argc, char** argv) {
  // CLI11 reports flag errors through app.exit(). Anything else it throws is a bug here;
  // catching it ends the process with a message instead of std::terminate.
  try {
    CLI::App app{"Expanse node daemon: samples GPUs and relays SLURM job telemetry.",
                 "expanse-daemon"};
    app.set_version_flag("--version", "expanse-daemon " + VersionString(),
                         "Print the version and exit");
    app.require_subcommand(0, 1);
    // The node flags (--events-dir, --shared-prefix, ...) are the top-level app's; subcommands
    // such as `hook` take them after their own name too.
    app.fallthrough(true);

    RoleFlags flags;
    app.add_option("--role", flags.role,
                   "controller (unit expanse-daemon) or sampler (unit "
                   "expanse-sampler, on workers)")
        ->check(CLI::IsMember({"controller", "sampler"}));
    const char* config_env = std::getenv("EXPANSE_DAEMON_CONFIG");
    flags.config_path = config_env && *config_env ? config_env : deploy::kDefaultDaemonConfigPath;
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
    app.add_option("--interval", flags.interval, "GPU sampling interval")->capture_default_str();
    app.add_option("--slow-interval", flags.slow_interval,
                   "Interval of energy and per-process GPU readings")
        ->capture_default_str();
    app.add_option("--flush-interval", flags.flush_interval,
                   "How often samples are handed on (one spool file per worker per interval)")
        ->capture_default_str();
    app.add_option("--heartbeat-interval", flags.heartbeat_interval, "Controller heartbeats")
        ->capture_default_str();
    app.add_option("--gres-conf", flags.gres_conf,
                   "This node's gres.conf (default: beside $SLURM_CONF, else /etc/slurm)");
    app.add_option("--user", flags.user, "Account the sampler runs as (hooks' sampler bootstrap)");
    AddBackendFlags(app, flags.backend);

    std::string agent_library, bootstrap = "off", hook_timeout;
    CLI::App* hook = app.add_subcommand("hook", "SLURM hook entry point (always exits 0)");
    std::string hook_kind;
    hook->add_option("kind", hook_kind, "prolog, epilog or taskprolog")
        ->required()
        ->check(CLI::IsMember({"prolog", "epilog", "taskprolog"}));
    hook->add_option("--agent-library", agent_library,
                     "TaskProlog: the in-process agent library to inject (unset = no injection)");
    hook->add_option("--sampler-bootstrap", bootstrap,
                     "Prolog: prolog = start or update this node's sampler; off = do not")
        ->check(CLI::IsMember({"prolog", "off"}))
        ->capture_default_str();
    hook->add_option("--timeout", hook_timeout, "Deadline (default 5s; taskprolog 2s)");

    gpu::BackendChoice gpus_choice;
    bool gpus_json = false;
    int gpus_repeat = 0;
    CLI::App* gpus = app.add_subcommand("gpus", "Show this node's GPUs as the daemon sees them");
    AddBackendFlags(*gpus, gpus_choice);
    gpus->add_flag("--json", gpus_json, "Print JSON");
    gpus->add_option("--repeat", gpus_repeat, "Also time each backend call this many times")
        ->check(CLI::Range(0, 100000));

    SamplerRunOptions run;
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

    int stack_pid = 0;
    bool stack_json = false;
    std::string stack_backend = "native";
    CLI::App* pystack = app.add_subcommand(
        "pystack", "Print the Python stacks of one process, as the daemon would sample them");
    pystack->add_option("--pid", stack_pid, "Process to read")
        ->required()
        ->check(CLI::PositiveNumber);
    pystack->add_option("--backend", stack_backend, "native or py-spy")
        ->check(CLI::IsMember({"native", "py-spy"}))
        ->capture_default_str();
    pystack->add_flag("--json", stack_json, "Print JSON");

    try {
      app.parse(argc, argv);
      if (sample->parsed()) {
        run.duration = Millis(duration, "--duration");
        run.interval = Millis(run_interval, "--interval");
        run.slow_interval = Millis(run_slow, "--slow-interval");
      }
      if (!flags.role.empty()) {
        Millis(flags.interval, "--interval");
        Millis(flags.slow_interval, "--slow-interval");
        Millis(flags.flush_interval, "--flush-interval");
        Millis(flags.heartbeat_interval, "--heartbeat-interval");
      }
    } catch (const CLI::ParseError& e) {
      const int status = app.exit(e);
      // A hook never fails a job, not even on a mistaken command line.
      for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "hook")
          return 0;
      }
      return status;
    }

    if (hook->parsed())
      return RunHookCommand(hook_kind, flags, agent_library, bootstrap, hook_timeout);
    if (gpus->parsed()) {
      const nlohmann::json report = GpuReport(gpus_choice, gpus_repeat);
      std::cout << (gpus_json ? report.dump(2) + "\n" : FormatGpuReport(report));
      return 0;  // no GPUs is a finding, not a failure of the command
    }
    if (sample->parsed()) {
      std::cout << RunSampler(run).dump(2) << "\n";
      return 0;
    }
    if (diagnostics->parsed())
      return RunDiagnostics(flags);
    if (pystack->parsed())
      return RunPystackDump(flags, stack_pid, stack_backend, stack_json);
    if (!flags.role.empty())
      return RunRole(flags);
    std::fputs("expanse-daemon: give --role controller|sampler or a command; see --help\n", stderr);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse-daemon: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}

}  // namespace expanse::agent
