#include "compute_cli.h"

namespace expanse::install {
namespace {

// A boolean flag as the guide writes them: `--flag`, `--flag=true` or `--flag=false`.
void AddBool(CLI::App& app, const std::string& name, bool& value, const std::string& help) {
  app.add_flag(name, value, help)
      ->default_str(value ? "true" : "false")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

}  // namespace

void AddComputeCommands(CLI::App& compute, ComputeCommands& commands) {
  InstallOptions& in = commands.install;
  UninstallOptions& un = commands.uninstall;
  CLI::App* install = compute.add_subcommand(
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
      ->add_option("--heartbeat-timeout", commands.heartbeat_timeout,
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

  CLI::App* uninstall = compute.add_subcommand(
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
  commands.install_command = install;
  commands.uninstall_command = uninstall;
}

}  // namespace expanse::install
