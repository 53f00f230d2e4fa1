#include "agent/daemon_commands.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "agent/capabilities.h"
#include "agent/controller_role.h"
#include "agent/gpu_report.h"
#include "agent/hook.h"
#include "agent/phase_b_triggers.h"
#include "agent/run_history.h"
#include "agent/sampler_bootstrap.h"
#include "agent/sampler_role.h"
#include "core/version.h"
#include "net/url_policy.h"
#include "pystack/native_reader.h"
#include "pystack/pyspy_source.h"

namespace expanse::agent {
namespace {

std::atomic<bool> g_stop{false};
void RequestStop(int /*signal*/) { g_stop = true; }

void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = RequestStop;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // A sampler a Prolog started inherits slurmd's signal mask; blocked, SIGTERM would never
  // reach the handler and a bootstrap replacing this sampler would wait in vain.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);
}

void Log(const std::string& line) { std::fprintf(stderr, "expanse-daemon: %s\n", line.c_str()); }

// The GPU backend the flags choose, with daemon.env's EXPANSE_NVML_LIBRARY where no
// --nvml-library was given.
gpu::BackendChoice EffectiveBackend(const gpu::BackendChoice& flags,
                                    const RuntimeSettings& settings) {
  gpu::BackendChoice backend = flags;
  if (backend.nvml_library.empty())
    backend.nvml_library = settings.nvml_library;
  return backend;
}

}  // namespace

std::string DefaultGresConf(Host& host) {
  std::string dir = "/etc/slurm";
  if (std::optional<std::string> conf = host.GetEnv("SLURM_CONF"); conf && !conf->empty()) {
    const size_t slash = conf->rfind('/');
    dir = slash == std::string::npos ? "." : conf->substr(0, slash);
  }
  return dir + "/gres.conf";
}

int RunDaemonRole(const DaemonOptions& flags, Host& host) {
  Result<RuntimeSettings> settings = LoadRuntimeSettings(flags.env_file, host.Environment());
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
  NodeCollectorOptions node;
  node.hostname = flags.hostname;
  node.backend = EffectiveBackend(flags.backend, *settings);
  node.events_dir = flags.events_dir;
  node.gres_conf_path = flags.gres_conf.empty() ? DefaultGresConf(host) : flags.gres_conf;
  PyStacksOptions stacks;
  stacks.hostname = node.hostname;
  stacks.settings = *settings;
  stacks.prefix_bin = flags.shared_prefix.empty() ? "" : flags.shared_prefix + "/bin";
  stacks.path_env = host.GetEnv("PATH").value_or("/usr/bin:/bin");
  stacks.log = Log;
  node.py_stacks = stacks;
  if (settings->profiling_agent_enable) {
    // Where capture agents spool and find their Phase B triggers; a failure costs only Phase B
    // and the aggregates, never the daemon.
    Result<CaptureDirectories> dirs = CaptureDirectoriesFor(
        settings->profiling_agent_enable, settings->profiling_enable, flags.control_dir);
    if (!dirs.ok()) {
      Log("in-process capture: " + dirs.status().message());
    } else {
      node.capture_control_dir = dirs->capture_control_dir;
      node.phase_b_control_dir = dirs->phase_b_control_dir;
    }
    node.phase_b_log = Log;
  }
  if (settings->cupti_enable) {
    CounterHelperOptions counters;
    counters.helper = FindCuptiHelper(*settings, flags.shared_prefix, node.hostname);
    counters.hostname = node.hostname;
    counters.escalation = settings->profiling_enable;
    counters.period = flags.interval;
    node.counters = counters;
  }
  const std::string path_env = host.GetEnv("PATH").value_or("/usr/bin:/bin");
  // A dcgmi refused for its mode or owner still gets an enrichment: it runs nothing, its
  // capability says why, and the file is checked again every tick. dcgmi's environment: PATH,
  // the C locale and LD_LIBRARY_PATH, none of the daemon's credentials.
  if (std::optional<DcgmEnricherOptions> dcgm =
          FindDcgmEnrichment(settings->dcgmi, settings->dcgm_host, flags.interval, path_env,
                             host.GetEnv("LD_LIBRARY_PATH").value_or(""))) {
    dcgm->hostname = node.hostname;
    node.dcgm = *dcgm;
  }

  if (flags.role == "sampler") {
    SamplerRoleOptions options;
    options.node = node;
    options.node.allocations_file = flags.state_dir + "/sampler/open-allocations.json";
    options.shared_prefix = flags.shared_prefix;
    options.state_dir = flags.state_dir + "/sampler";
    options.interval = flags.interval;
    options.slow_interval = flags.slow_interval;
    options.flush_interval = flags.flush_interval;
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
    const Status status = RunSamplerRole(options, host, g_stop);
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
  options.interval = flags.interval;
  options.slow_interval = flags.slow_interval;
  options.flush_interval = flags.flush_interval;
  options.heartbeat_interval = flags.heartbeat_interval;
  options.settings = *settings;
  options.control_dir = flags.control_dir;
  options.shared_prefix_override = flags.shared_prefix;
  options.daemon_version = VersionString();
  options.log = Log;
  // A crash must leave its reason for the next start to report (run_history.h).
  InstallFatalRecorder(options.state_dir);
  const Status status = RunControllerRole(options, host, g_stop);
  if (!status.ok()) {
    Log(status.message());
    return status.reason() == "credential_revoked" ? 0 : 1;
  }
  return 0;
}

int RunHookCommand(const HookCommandOptions& hook, const DaemonOptions& flags, Host& host) {
  // Whatever happens below, the hook ends with status 0 within its deadline.
  const std::string& kind = hook.kind;
  const std::chrono::milliseconds deadline =
      hook.timeout.value_or(std::chrono::milliseconds(kind == "taskprolog" ? 2000 : 5000));
  ArmHookDeadline(deadline);
  HookOptions options;
  options.kind = kind;
  options.events_dir = flags.events_dir;
  options.control_dir = flags.control_dir;
  options.agent_library = hook.agent_library;
  if (options.agent_library.empty() && hook.inject_node_agent && !flags.shared_prefix.empty())
    options.agent_library = NodeAgentLibrary(flags.shared_prefix, flags.hostname);
  options.hostname = flags.hostname;
  options.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (kind == "prolog" && hook.sampler_bootstrap && !flags.shared_prefix.empty()) {
    options.bootstrap_sampler = [&] {
      if (ControllerInstalledHere(host, deploy::kDefaultInstallStateDir)) {
        options.log(
            "expanse hook prolog: no sampler started: this host runs the controller "
            "daemon, which samples its GPUs");
        return;
      }
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
      b.control_dir = flags.control_dir;
      b.user = flags.user;
      b.log_file = flags.state_dir + "/sampler.log";
      b.shared_prefix = flags.shared_prefix;
      b.hostname = options.hostname;
      StartSamplerDetached(b, host);
    };
  }
  const std::string out = RunHook(options, host.Environment(), host.clock());
  // TaskProlog's export lines first: a user lookup that is slow (sssd, LDAP) must not use up
  // the deadline before them.
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  // The events directory belongs to the daemon user, who collects and deletes the events. Only
  // the root hooks write it: TaskProlog runs as the job's user, who could not hand it over.
  if (!flags.user.empty() && kind != "taskprolog") {
    if (std::optional<UserAccount> account = host.LookupUser(flags.user)) {
      (void)host.SetOwner(flags.events_dir, account->uid, account->gid);
    }
  }
  return 0;
}

int RunDiagnosticsCommand(const DaemonOptions& flags, Host& host) {
  nlohmann::json out;
  Result<RuntimeSettings> settings = LoadRuntimeSettings(flags.env_file, host.Environment());
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
      {"EXPANSE_LIVE_DETECTION", settings->live_detection ? "1" : "0"},
      {"EXPANSE_LIVE_STUCK_AFTER_S", settings->live_stuck_after_s},
      {"EXPANSE_LIVE_NO_PROCESS_AFTER_S", settings->live_no_process_after_s},
      {"EXPANSE_DCGMI", settings->dcgmi},
      {"EXPANSE_DCGM_HOST", settings->dcgm_host},
      {"EXPANSE_SEGMENT_UPLOAD_MODE", settings->segment_upload_mode},
      // A proxy URL may carry a user name and password: never shown.
      {"HTTPS_PROXY", net::RedactUrlCredentials(settings->https_proxy)},
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
  inputs.hostname = flags.hostname;
  inputs.path_env = host.GetEnv("PATH").value_or("");
  if (settings->profiling_agent_enable) {
    // What the running service checks, but only looked at: diagnostics repairs nothing.
    PermissionCheckOptions check = DaemonPermissionOptions(
        flags.control_dir, flags.shared_prefix,
        flags.shared_prefix.empty() ? std::string() : WorkerSpoolRoot(flags.shared_prefix),
        flags.hostname);
    check.repairable_roots.clear();
    inputs.profiling_permissions_problem = CheckProfilingPermissions(check).problem;
  }
  out["capabilities"] = CapabilitiesJson(DescribeCapabilities(inputs));
  out["gpus"] = gpus;
  std::cout << out.dump(2) << "\n";
  return 0;
}

// One sample of one process: what the stack collector would fold. Exit 0 with the stacks, 1
// with the reason (e.g. "py_stacks: ptrace denied for pid 7: ...").
int RunPystackCommand(const PystackCommandOptions& pystack, const DaemonOptions& flags,
                      Host& host) {
  const std::string& backend = pystack.backend;
  Result<RuntimeSettings> settings = LoadRuntimeSettings(flags.env_file, host.Environment());
  if (!settings.ok()) {
    Log(settings.status().message());
    return 1;
  }
  std::unique_ptr<pystack::StackSource> source;
  if (backend == "py-spy") {
    const std::optional<std::string> path = host.GetEnv("PATH");
    Result<std::string> pyspy = pystack::FindPyspy(
        settings->pyspy, flags.shared_prefix.empty() ? "" : flags.shared_prefix + "/bin",
        path ? path->c_str() : nullptr);
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
  Result<pystack::ProcessStacks> stacks = source->Sample(static_cast<pid_t>(pystack.pid));
  if (!stacks.ok()) {
    Log(stacks.status().message());
    return 1;
  }
  if (pystack.json) {
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

int RunGpusCommand(const gpu::BackendChoice& choice, int repeat, bool json) {
  const nlohmann::json report = GpuReport(choice, repeat);
  std::cout << (json ? report.dump(2) + "\n" : FormatGpuReport(report));
  return 0;  // no GPUs is a finding, not a failure of the command
}

int RunSampleCommand(const SamplerRunOptions& options) {
  std::cout << RunSampler(options).dump(2) << "\n";
  return 0;
}

}  // namespace expanse::agent
