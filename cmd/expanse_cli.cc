#include "expanse_cli.h"

#include <string.h>  // explicit_bzero
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "core/duration.h"
#include "core/version.h"
#include "doctor_cli.h"
#include "install/installer.h"
#include "install/token_intake.h"
#include "release_cli.h"
#include "report_cli.h"

namespace expanse::install {
namespace {

// A boolean flag as the guide writes them: `--flag`, `--flag=true` or `--flag=false`.
void AddBool(CLI::App& app, const std::string& name, bool& value, const std::string& help) {
  app.add_flag(name, value, help)
      ->default_str(value ? "true" : "false")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

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

  InstallOptions in;
  std::string heartbeat_timeout = "1m";
  CLI::App* install = compute->add_subcommand(
      "install", "Install the controller daemon (with an install token) or a worker sampler");
  install->add_option("--type", in.type,
                      "slurm: install on a SLURM cluster; unset: only write "
                      "the credential config");
  install->add_option("--role", in.role, "controller (with a token) or sampler (worker, no token)")
      ->capture_default_str();
  install->add_option("--shared-prefix", in.shared_prefix,
                      "Absolute path mounted at the same place on every node (e.g. /srv/expanse)");
  install->add_option("--daemon-version", in.daemon_version,
                      "Daemon release to download from --releases-url and verify");
  install->add_option("--daemon-binary", in.daemon_binary,
                      "Staged daemon archive with its .sig beside it, or a bare binary (not "
                      "verifiable); excludes --daemon-version");
  install->add_option("--control-plane", in.control_plane,
                      "Control-plane URL from Add compute (default: the saved one on reinstall)");
  install->add_option("--data-plane", in.data_plane,
                      "Data-plane URL (required for a fresh install or a rebuilt controller)");
  install->add_option("--config", in.config_path,
                      "Credential path (default /var/lib/slurm/.expanse/config.json); local disk");
  install->add_option("--user", in.user, "Existing account the daemon and samplers run as")
      ->capture_default_str();
  install->add_option("--slurm-conf", in.slurm_conf,
                      "The controller's slurm.conf (default: discovered)");
  AddBool(*install, "--patch-slurm-conf", in.patch_slurm_conf,
          "Apply the planned Prolog/Epilog/TaskProlog changes; false leaves SLURM files alone "
          "and prints the lines to add");
  AddBool(*install, "--reconfigure", in.reconfigure,
          "Run `scontrol reconfigure` after hook changes; false prints it");
  AddBool(*install, "--systemd", in.systemd,
          "Install and start the service and wait for a heartbeat; false prints the unit");
  install
      ->add_option("--heartbeat-timeout", heartbeat_timeout,
                   "How long to wait for the first authenticated heartbeat")
      ->capture_default_str();
  install
      ->add_option("--sampler-bootstrap", in.sampler_bootstrap,
                   "prolog: the Prolog starts or updates a worker's sampler; off: install "
                   "samplers explicitly")
      ->capture_default_str();
  install->add_option("--cupti-variant", in.cupti_variant,
                      "Pin a CUPTI variant such as cuda1300 (default: chosen by the driver)");
  install
      ->add_option("--cupti-mode", in.cupti_mode,
                   "Counter capability: perfmon (CAP_PERFMON), sysadmin (CAP_SYS_ADMIN) or none")
      ->capture_default_str();
  AddBool(*install, "--profiling-agent", in.profiling_agent,
          "Wire TaskProlog for the in-process capture agent; false also disables it in the units");
  AddBool(*install, "--bundled-pyspy", in.bundled_pyspy,
          "Install the py-spy shipped with the daemon release into <prefix>/bin");
  install
      ->add_option("--releases-url", in.releases_url,
                   "Release mirror base URL (signatures are still required)")
      ->capture_default_str();
  install->add_option("--cosign-key", in.cosign_key,
                      "Verification public key (PEM) replacing the embedded one");
  AddBool(*install, "--reinstall,--force", in.reinstall,
          "Clean and reinstall keeping the compute identity; never prompts, exchanges "
          "EXPANSE_INSTALL_TOKEN only when it is set");
  AddBool(*install, "--write-config-only", in.write_config_only,
          "Exchange the token and write the credential config, install nothing else");
  AddBool(*install, "--allow-downgrade", in.allow_downgrade,
          "Allow a daemon older than the newest installed here");
  AddBool(*install, "--verbose", in.verbose, "Print install and rollback diagnostics");
  install->add_option("--hostname", in.hostname, "This node's name (default: the host name)");

  UninstallOptions un;
  CLI::App* uninstall = compute->add_subcommand(
      "uninstall", "Stop collection, remove managed files and hooks, deprovision the compute");
  uninstall->add_option("--type", un.type, "slurm");
  uninstall->add_option("--role", un.role, "controller or sampler")->capture_default_str();
  uninstall->add_option("--shared-prefix", un.shared_prefix,
                        "As given to install; checked against the install state");
  uninstall->add_option("--slurm-conf", un.slurm_conf, "As given to install");
  uninstall->add_option("--user", un.user,
                        "As given to install; checked against the install state");
  uninstall->add_option("--config", un.config_path, "As given to install");
  AddBool(*uninstall, "--keep-identity", un.keep_identity,
          "Keep the credential and do not deprovision (not for a registration reset)");
  AddBool(*uninstall, "--reconfigure", un.reconfigure,
          "Run `scontrol reconfigure` after removing hook wiring");
  AddBool(*uninstall, "--verbose", un.verbose, "Print diagnostics");
  uninstall->add_option("--hostname", un.hostname, "This node's name (default: the host name)");

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
  if (install->parsed()) {
    Result<std::chrono::milliseconds> timeout = ParseDuration(heartbeat_timeout);
    if (!timeout.ok()) {
      std::fprintf(stderr, "expanse: --heartbeat-timeout: %s\n",
                   timeout.status().message().c_str());
      return kExitUsage;
    }
    in.heartbeat_timeout = *timeout;
    return Report(
        RunInstall(in, PathsFromEnvironment(), std::move(token), ConsoleOutput(in.verbose)));
  }
  if (uninstall->parsed())
    return Report(RunUninstall(un, PathsFromEnvironment(), ConsoleOutput(un.verbose)));
  if (doctor.command->parsed())
    return RunDoctorCli(doctor);
  if (ReportCommandParsed(report_commands))
    return RunReportCommand(report_commands, std::move(api_token));
  return Report(RunReleaseCommand(release_commands));
}

}  // namespace expanse::install
