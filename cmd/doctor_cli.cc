#include "doctor_cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/host.h"
#include "install/installer.h"

namespace expanse::install {
namespace {

bool Given(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == flag || a.rfind(flag + "=", 0) == 0;
  });
}

}  // namespace

void AddDoctorCommand(CLI::App& app, DoctorCli& cli) {
  cli.command = app.add_subcommand(
      "doctor",
      "Check the deployment (slurm.conf hooks, gres.conf, cgroup.conf, workers, spool, "
      "credential, disk) and print each finding with its fix. Exit 0: nothing to do; 1: "
      "action needed; 2: could not run. Flags after --daemon go to `expanse-daemon doctor` "
      "(--host NODE, --json, --slurm-conf, --no-planes, ...)");
  cli.command->add_option("--daemon", cli.daemon,
                          "The expanse-daemon to run (default: the installed one)");
  cli.command->add_option("--install-state-dir", cli.state_dir, "Where the install state is")
      ->capture_default_str();
  // Everything from the first argument this command does not know is the daemon's.
  cli.command->prefix_command();
}

Result<std::vector<std::string>> DoctorDaemonArgv(const DoctorCli& cli,
                                                  const std::optional<InstallState>& controller,
                                                  const std::optional<InstallState>& sampler) {
  const std::optional<InstallState>& state = controller ? controller : sampler;
  std::string daemon = cli.daemon;
  if (daemon.empty() && state && !state->shared_prefix.empty())
    daemon = state->shared_prefix + "/bin/expanse-daemon";
  if (daemon.empty()) {
    return FailedPreconditionError(
               "no Expanse install found in " + cli.state_dir +
               "; pass --daemon /path/to/expanse-daemon (and --shared-prefix, --config)")
        .WithReason("usage");
  }
  std::vector<std::string> argv = {daemon, "doctor"};
  const auto add = [&](const std::string& flag, const std::string& value) {
    if (!value.empty() && !Given(cli.args, flag))
      argv.insert(argv.end(), {flag, value});
  };
  if (state) {
    add("--shared-prefix", state->shared_prefix);
    add("--config", state->config_path);
    add("--user", state->user);
  }
  if (controller)
    add("--install-state", StatePath(cli.state_dir, "controller"));
  argv.insert(argv.end(), cli.args.begin(), cli.args.end());
  return argv;
}

int RunDoctorCli(DoctorCli cli) {
  cli.args = cli.command->remaining();
  Host& host = RealHost::Get();
  Result<std::optional<InstallState>> controller =
      LoadInstallState(host, cli.state_dir, "controller");
  Result<std::optional<InstallState>> sampler = LoadInstallState(host, cli.state_dir, "sampler");
  Result<std::vector<std::string>> argv = DoctorDaemonArgv(
      cli, controller.ok() ? *controller : std::nullopt, sampler.ok() ? *sampler : std::nullopt);
  if (!argv.ok()) {
    std::fprintf(stderr, "expanse doctor: %s\n", argv.status().message().c_str());
    return kExitUsage;
  }
  std::vector<char*> raw;
  for (std::string& arg : *argv)
    raw.push_back(arg.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  execv(raw[0], raw.data());
  std::fprintf(stderr, "expanse doctor: cannot run %s: %s\n", raw[0], std::strerror(errno));
  return kExitUsage;
}

}  // namespace expanse::install
