#include "expanse_cli.h"

#include <string.h>  // explicit_bzero
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "compute_cli.h"
#include "core/duration.h"
#include "core/version.h"
#include "doctor_cli.h"
#include "install/installer.h"
#include "install/token_intake.h"
#include "release_cli.h"
#include "report_cli.h"

namespace expanse::install {
namespace {

Output ConsoleOutput(bool verbose) {
  Output out;
  out.progress = [](const std::string& line) { std::printf("==> %s\n", line.c_str()); };
  out.detail = [verbose](const std::string& line) {
    if (verbose)
      std::printf("    %s\n", line.c_str());
  };
  out.text = [](const std::string& block) {
    std::fputs(block.c_str(), stdout);
    if (!block.empty() && block.back() != '\n')
      std::fputc('\n', stdout);
  };
  return out;
}

// The install's test hooks (docs/testing.md) come from the environment, read here, in the
// CLI, so the library never reads it.
HostPaths PathsFromEnvironment() {
  auto read = [](const char* name) -> std::optional<int> {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): start-up, one thread
    if (v == nullptr || *v == '\0')
      return std::nullopt;
    return std::atoi(v);
  };
  HostPaths paths;
  paths.faults.fail_after_changes = read("EXPANSE_INSTALL_TEST_FAIL_AFTER");
  paths.faults.kill_after_changes = read("EXPANSE_INSTALL_TEST_KILL_AFTER");
  return paths;
}

int Report(const Status& s) {
  std::fflush(stdout);
  if (s.ok())
    return kExitOk;
  std::fprintf(stderr, "expanse: %s\n", s.message().c_str());
  return s.reason() == "usage" ? kExitUsage : kExitFailed;
}

}  // namespace

std::optional<SecretString> TakeTokenFromEnvironment() {
  const char* v = std::getenv(kInstallTokenVariable);  // NOLINT(concurrency-mt-unsafe): start-up
  std::optional<SecretString> out;
  if (v != nullptr && *v != '\0')
    out.emplace(std::string(v));
  if (v != nullptr) {
    explicit_bzero(const_cast<char*>(v), std::strlen(v));
    unsetenv(kInstallTokenVariable);
  }
  return out;
}

int RunExpanseCli(int argc, char** argv) {
  // Taken before anything else, so no child process can inherit the token.
  std::optional<SecretString> token = TakeTokenFromEnvironment();
  std::optional<report::ApiToken> api_token = report::TakeApiTokenFromEnvironment();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"Expanse operator CLI: installs and manages Expanse on a SLURM cluster.", "expanse"};
  app.set_version_flag("--version", "expanse " + VersionString(), "Print the version and exit");
  // Not require_subcommand(1): CLI11 would then report a missing command before an unknown
  // flag, which hides the actual mistake.
  app.require_subcommand(0, 1);

  CLI::App* compute = app.add_subcommand("compute", "Install, upgrade or remove Expanse on a node");
  compute->require_subcommand(1);

  // A repeated flag takes its last value, as with most installers (scripts append overrides).
  compute->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  ComputeCommands commands;
  AddComputeCommands(*compute, commands);
  InstallOptions& in = commands.install;
  UninstallOptions& un = commands.uninstall;

  DoctorCli doctor;
  AddDoctorCommand(app, doctor);
  ReleaseCommands release_commands;
  AddReleaseCommands(app, release_commands);
  ReportCommands report_commands;
  AddReportCommands(app, report_commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version, or the error
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stderr);
    std::fputs("expanse: a command is required\n", stderr);
    return kExitUsage;
  }
  if (commands.install_command->parsed()) {
    Result<std::chrono::milliseconds> timeout = ParseDuration(commands.heartbeat_timeout);
    if (!timeout.ok()) {
      std::fprintf(stderr, "expanse: --heartbeat-timeout: %s\n",
                   timeout.status().message().c_str());
      return kExitUsage;
    }
    in.heartbeat_timeout = *timeout;
    return Report(
        RunInstall(in, PathsFromEnvironment(), std::move(token), ConsoleOutput(in.verbose)));
  }
  if (commands.uninstall_command->parsed())
    return Report(RunUninstall(un, PathsFromEnvironment(), ConsoleOutput(un.verbose)));
  if (doctor.command->parsed())
    return RunDoctorCli(doctor);
  if (ReportCommandParsed(report_commands))
    return RunReportCommand(report_commands, std::move(api_token));
  return Report(RunReleaseCommand(release_commands));
}

}  // namespace expanse::install
