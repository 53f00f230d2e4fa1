#include "agent/hook.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <string_view>

#include "agent/job_events.h"
#include "agent/profiling_permissions.h"

namespace expanse::agent {
namespace {

void ExitQuietly(int /*signal*/) { _exit(0); }

// A value for a POSIX shell's `export NAME=value` as TaskProlog's output is read by slurmstepd:
// it takes the rest of the line literally, so only a newline could break it.
bool SafeExportValue(std::string_view value) {
  return value.find('\n') == std::string_view::npos && value.find('\0') == std::string_view::npos;
}

}  // namespace

void ArmHookDeadline(std::chrono::milliseconds deadline) {
  struct sigaction action {};
  action.sa_handler = ExitQuietly;
  sigaction(SIGALRM, &action, nullptr);
  itimerval timer{};
  timer.it_value.tv_sec = deadline.count() / 1000;
  timer.it_value.tv_usec = (deadline.count() % 1000) * 1000;
  setitimer(ITIMER_REAL, &timer, nullptr);
}

std::string NodeAgentLibrary(const std::string& shared_prefix, const std::string& hostname) {
  return shared_prefix + "/lib/cupti-nodes/" + hostname + "/lib/libexpanse-agent.so";
}

std::map<std::string, std::string> EnvironmentMap(char** environ_entries) {
  std::map<std::string, std::string> env;
  for (char** e = environ_entries; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos) {
      env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
  }
  return env;
}

std::string RunHook(const HookOptions& options, const std::map<std::string, std::string>& env,
                    Clock& clock) {
  auto log = [&](const std::string& line) {
    if (options.log)
      options.log("expanse hook " + options.kind + ": " + line);
  };
  if (options.kind == "prolog" || options.kind == "epilog") {
    const std::string kind = options.kind == "prolog" ? "start" : "end";
    Result<JobEvent> event = JobEventFromEnvironment(kind, env, options.hostname, clock.NowMs());
    if (!event.ok()) {
      log(event.status().message());
    } else if (Status written = WriteJobEvent(options.events_dir, *event); !written.ok()) {
      log("job " + event->job_id + " " + kind + " not recorded: " + written.message());
    }
    if (options.kind == "prolog" && options.bootstrap_sampler)
      options.bootstrap_sampler();
    return "";
  }
  if (options.kind == "taskprolog") {
    // A task inherits its launcher's environment: srun in a batch script passes on what the
    // batch step's TaskProlog exported on the first node, which names that node's agent (and
    // its libcupti for NVTX). Ours is replaced or withdrawn here; a job's own tool is left be.
    const auto inherited = env.find("CUDA_INJECTION64_PATH");
    const bool inherited_ours =
        inherited != env.end() && inherited->second.ends_with("/libexpanse-agent.so");
    if (inherited != env.end() && !inherited->second.empty() && !inherited_ours)
      return "";  // the job's own profiler (Nsight, compute-sanitizer) wins
    const std::string unset_cuda = inherited_ours ? "unset CUDA_INJECTION64_PATH\n" : "";
    const auto nvtx = env.find("NVTX_INJECTION64_PATH");
    const std::string unset_nvtx =
        nvtx != env.end() && nvtx->second.find("/lib/cupti-nodes/") != std::string::npos
            ? "unset NVTX_INJECTION64_PATH\n"
            : "";
    struct stat st {};
    const bool inject = !options.agent_library.empty() &&
                        stat((options.control_dir + "/" + kDisableMarkerName).c_str(), &st) != 0 &&
                        stat(options.agent_library.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                        SafeExportValue(options.agent_library) &&
                        SafeExportValue(options.control_dir);
    if (!inject)
      return unset_cuda + unset_nvtx;  // off, disabled on this node, or no agent here
    // The agent finds its triggers and spool under the node's control directory.
    return unset_nvtx + "export CUDA_INJECTION64_PATH=" + options.agent_library +
           "\nexport EXPANSE_CONTROL_DIR=" + options.control_dir + "\n";
  }
  log("unknown hook kind '" + options.kind + "'");
  return "";
}

}  // namespace expanse::agent
