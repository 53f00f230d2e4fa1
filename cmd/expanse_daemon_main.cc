// expanse-daemon: the node daemon (--role controller|sampler), the SLURM hook entry points and
// the GPU diagnostics. The flags are daemon_flags.cc's; the commands live in src/agent
// (agent/daemon_commands.h) and reach the machine through RealHost.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <variant>

#include "agent/daemon_commands.h"
#include "core/host.h"
#include "daemon_flags.h"

namespace {

// The host name up to its first dot.
std::string ShortHostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string host = name;
  if (size_t dot = host.find('.'); dot != std::string::npos)
    host.resize(dot);
  return host;
}

int Run(int argc, char** argv) {
  using expanse::cmd::DaemonCommandLine;
  namespace agent = expanse::agent;
  expanse::Host& host = expanse::RealHost::Get();
  auto parsed = expanse::cmd::ParseDaemonCommandLine(argc, argv, host);
  if (const auto* exit_now = std::get_if<expanse::cmd::ExitNow>(&parsed))
    return exit_now->status;
  DaemonCommandLine& line = std::get<DaemonCommandLine>(parsed);
  if (line.node.hostname.empty())
    line.node.hostname = ShortHostName();
  switch (line.command) {
    case DaemonCommandLine::Command::kHook:
      return agent::RunHookCommand(line.hook, line.node, host);
    case DaemonCommandLine::Command::kGpus:
      return agent::RunGpusCommand(line.gpus_backend, line.gpus_repeat, line.gpus_json);
    case DaemonCommandLine::Command::kSample:
      return agent::RunSampleCommand(line.sample);
    case DaemonCommandLine::Command::kDiagnostics:
      return agent::RunDiagnosticsCommand(line.node, host);
    case DaemonCommandLine::Command::kDoctor:
      return expanse::doctor::RunDoctorCommand(line.doctor, host, std::cout, std::cerr);
    case DaemonCommandLine::Command::kPystack:
      return agent::RunPystackCommand(line.pystack, line.node, host);
    case DaemonCommandLine::Command::kRole:
      return agent::RunDaemonRole(line.node, host);
    case DaemonCommandLine::Command::kNone:
      break;
  }
  std::fputs("expanse-daemon: give --role controller|sampler or a command; see --help\n", stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // A SIGCHLD ignored by whoever started us (exec keeps it) would let the kernel reap our
  // children before we read their status (ChildProcess, Subprocess): take the default back.
  signal(SIGCHLD, SIG_DFL);
  // CLI11 reports flag errors through app.exit(). Anything else thrown is a bug; catching it
  // ends the process with a message instead of std::terminate.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse-daemon: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}
