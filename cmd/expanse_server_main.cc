// expanse-server: control plane, data plane and console API (`serve`), and the non-interactive
// bootstrap of the first organisation, user and API token (`admin`).

#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "core/duration.h"
#include "core/version.h"
#include "server/admin.h"
#include "server/serve.h"

namespace {

// Secrets come from the environment or stdin, never argv (visible in ps and shell history).
expanse::Result<std::string> ReadPassword(const std::string& env_name, bool from_stdin) {
  if (from_stdin) {
    std::string line;
    int c;
    while ((c = std::getchar()) != EOF && c != '\n')
      line.push_back(static_cast<char>(c));
    return line;
  }
  const char* value = std::getenv(env_name.c_str());
  if (value == nullptr || *value == '\0') {
    return expanse::InvalidArgumentError("set the password in $" + env_name +
                                         " or pass --password-stdin");
  }
  return std::string(value);
}

// glibc's defaults hand memory back to the kernel as soon as 128 KiB lie free at the top of a
// thread's arena, and map each block over 128 KiB by itself. A replica decodes, re-encodes and
// sends a batch of tens or hundreds of KiB on every request thread, so with the defaults it
// faulted the same pages in, zeroed them and gave them back for every batch: 40 % of its CPU
// in bench/replicas_vs_victoriametrics.sh (docs/performance.md). Keep up to 64 MiB free per
// arena, and take blocks up to 32 MiB (a large batch) from the arenas.
void KeepFreedMemoryForReuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

int Fail(const expanse::Status& status) {
  std::fprintf(stderr, "expanse-server: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"Expanse server: control plane, data plane and console API.", "expanse-server"};
    app.set_version_flag("--version", "expanse-server " + expanse::VersionString(),
                         "Print the version and exit");

    expanse::server::ServeFlags serve;
    CLI::App* serve_cmd = app.add_subcommand("serve", "Serve the planes until SIGINT/SIGTERM");
    serve_cmd
        ->add_option("--db,--database", serve.options.db_path,
                     "SQLite database file, or a postgresql:// URI that replicas share")
        ->required();
    serve_cmd->add_option("--tsdb-dir", serve.options.tsdb_dir,
                          "The embedded telemetry store's directory (default: the --db file + "
                          ".tsdb; required with a PostgreSQL --db; refused with --telemetry-store "
                          "remote)");
    serve_cmd
        ->add_option("--telemetry-store", serve.options.telemetry_store,
                     "Where samples live: embedded (this machine's --tsdb-dir) or remote (a "
                     "Prometheus remote-write and PromQL store that replicas share)")
        ->check(CLI::IsMember({"embedded", "remote"}))
        ->capture_default_str();
    serve_cmd->add_option("--telemetry-url", serve.telemetry_url,
                          "The remote store's root, e.g. http://127.0.0.1:8428 (VictoriaMetrics): "
                          "writes go to <url>/api/v1/write, queries to <url>/api/v1/query_range");
    serve_cmd->add_option("--telemetry-write-url", serve.options.remote_telemetry.write_url,
                          "The remote-write URL, when not <--telemetry-url>/api/v1/write");
    serve_cmd->add_option("--telemetry-query-url", serve.options.remote_telemetry.query_url,
                          "The Prometheus query API's root, when not --telemetry-url");
    serve_cmd->add_option("--telemetry-token-file", serve.telemetry_token_file,
                          "File (mode 600) holding the bearer token the remote store wants");
    serve_cmd->add_option("--telemetry-ca-file", serve.options.remote_telemetry.ca_file,
                          "CA bundle for the remote store's TLS (default: the system's)");
    serve_cmd->add_option("--forward-remote-write", serve.options.forward.url,
                          "Also send every stored batch's samples to this remote-write URL (the "
                          "site's Prometheus stack), best effort");
    serve_cmd->add_option("--forward-token-file", serve.forward_token_file,
                          "File (mode 600) holding the bearer token the forwarding receiver wants");
    serve_cmd->add_option("--forward-ca-file", serve.options.forward.ca_file,
                          "CA bundle for the forwarding receiver's TLS (default: the system's)");
    serve_cmd
        ->add_option("--control-listen", serve.options.control_listen,
                     "host:port of the control plane")
        ->capture_default_str();
    serve_cmd->add_option("--data-listen", serve.options.data_listen,
                          "host:port of the data plane (default: the control plane's)");
    serve_cmd->add_option("--console-listen", serve.options.console_listen,
                          "host:port of the console and query API (default: the control plane's)");
    serve_cmd
        ->add_option("--credential-rate", serve.options.credential_requests_per_second,
                     "Requests per second one daemon credential may sustain")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    serve_cmd->add_option("--tls-cert", serve.options.tls_cert, "PEM certificate chain");
    serve_cmd->add_option("--tls-key", serve.options.tls_key, "PEM private key");
    serve_cmd->add_option("--tls-self-signed", serve.options.tls_self_signed_dir,
                          "Directory for a self-signed CA and certificate (clients use its ca.pem "
                          "as SSL_CERT_FILE)");
    serve_cmd->add_option("--tls-host", serve.options.tls_hosts,
                          "Extra DNS name or IP for the self-signed certificate (repeatable)");
    serve_cmd->add_option("--public-control-url", serve.options.control.control_plane_url,
                          "Control-plane URL shown by Add compute (default: from the listener)");
    serve_cmd->add_option("--public-data-url", serve.options.control.data_plane_url,
                          "Data-plane URL shown by Add compute (default: from the listener)");
    serve_cmd
        ->add_option("--daemon-version", serve.options.control.daemon_version,
                     "Daemon release pinned for new computes")
        ->default_val(std::string(expanse::ReleaseVersion()));
    serve_cmd->add_option("--releases-dir", serve.options.releases_dir,
                          "Directory served read-only at /releases/ on the control listener (a "
                          "release mirror: manifest.json, archives and .sig files)");
    serve_cmd
        ->add_option("--install-token-ttl", serve.install_token_ttl, "Lifetime of install tokens")
        ->capture_default_str();
    serve_cmd
        ->add_option("--stale-after", serve.stale_after,
                     "A compute without a heartbeat this long is stale")
        ->capture_default_str();
    serve_cmd->add_option("--segment-dir", serve.options.segment_dir,
                          "Where trace segments are kept (default: the --db file + .segments; "
                          "with a PostgreSQL --db, a directory every replica shares, or none "
                          "are kept)");
    serve_cmd->add_option("--segment-s3-url", serve.options.segment_s3.url,
                          "Keep trace segments in an S3-compatible bucket instead: "
                          "https://host[:port]/bucket[/key-prefix], path-style (what replicas "
                          "share); the bucket must exist");
    serve_cmd
        ->add_option("--segment-s3-region", serve.options.segment_s3.region,
                     "The bucket's region, for request signing")
        ->capture_default_str();
    serve_cmd->add_option("--segment-s3-credentials-file", serve.segment_s3_credentials_file,
                          "File (mode 600) holding access-key:secret-key for the bucket");
    serve_cmd->add_option("--segment-s3-ca-file", serve.options.segment_s3.ca_file,
                          "CA bundle for the bucket's TLS (default: the system's)");
    serve_cmd
        ->add_option("--retention", serve.retention,
                     "How long the embedded telemetry store keeps samples (0 = forever; a remote "
                     "store keeps its own)")
        ->capture_default_str();
    serve_cmd
        ->add_option("--segment-retention", serve.segment_retention,
                     "How long trace segments are kept after they arrive (0 = forever)")
        ->capture_default_str();
    serve_cmd
        ->add_option("--stack-retention", serve.stack_retention,
                     "How long jobs' Python stacks are kept after their window (0 = forever)")
        ->capture_default_str();

    serve_cmd
        ->add_option("--alert-interval", serve.alert_interval,
                     "How often alert rules are evaluated")
        ->capture_default_str();
    serve_cmd->add_option("--smtp-url", serve.options.alerts.smtp_url,
                          "SMTP server for email alerts: smtp://host:port (STARTTLS required "
                          "unless loopback) or smtps://host:port; unset = no email");
    serve_cmd
        ->add_option("--smtp-from", serve.options.alerts.mail_from, "Sender address of alert mails")
        ->capture_default_str();
    serve_cmd->add_option("--smtp-credentials-file", serve.smtp_credentials_file,
                          "File (mode 600) holding username:password for the SMTP server");
    serve_cmd->add_flag("--alert-loopback-webhooks", serve.options.alerts.loopback_webhooks,
                        "Allow alert webhooks to this machine's loopback addresses (a local "
                        "receiver); off, an organisation's admin cannot make the server post to "
                        "local services");
    serve_cmd->add_option("--metrics-token-file", serve.metrics_token_file,
                          "File (mode 600) holding the bearer token Prometheus sends to GET "
                          "/metrics on the control plane; unset = no /metrics");
    serve_cmd->add_option("--alert-ca-file", serve.options.alerts.ca_file,
                          "CA bundle for https webhooks and the SMTP server's TLS (default: "
                          "the system's)");

    expanse::server::AdminFlags admin;
    CLI::App* admin_cmd = app.add_subcommand("admin", "Bootstrap organisations and users");
    admin_cmd->require_subcommand(1);
    std::string password_env = "EXPANSE_ADMIN_PASSWORD";
    bool password_stdin = false;
    auto common = [&](CLI::App* cmd) {
      cmd->add_option("--db,--database", admin.db_path, "SQLite database file or postgresql:// URI")
          ->required();
      cmd->add_option("--org", admin.org_slug, "Organisation slug, e.g. acme")->required();
      cmd->add_option("--email", admin.email, "The user's email")->required();
      cmd->add_option("--password-env", password_env, "Environment variable holding the password")
          ->capture_default_str();
      cmd->add_flag("--password-stdin", password_stdin, "Read the password from stdin");
    };
    CLI::App* bootstrap = admin_cmd->add_subcommand(
        "bootstrap",
        "Create an organisation, its owner and an admin API token; print them as JSON");
    common(bootstrap);
    bootstrap->add_option("--org-name", admin.org_name, "Organisation display name")->required();
    bootstrap->add_option("--token-name", admin.token_name, "Name of the API token")
        ->capture_default_str();
    CLI::App* add_user = admin_cmd->add_subcommand("add-user", "Add a user to an organisation");
    common(add_user);
    add_user->add_option("--role", admin.role, "owner, admin, member or viewer")
        ->capture_default_str();
    add_user->add_flag("--can-register-compute", admin.can_register_compute,
                       "Grant a member the permission to register computes");
    add_user->add_option("--slurm-user", admin.slurm_user,
                         "The SLURM user the member's jobs run under (what their jobs:own API "
                         "tokens read); kept when omitted");
    CLI::App* set_slurm_user = admin_cmd->add_subcommand(
        "set-slurm-user",
        "Set the SLURM user a member's jobs run under (\"\" removes it); no password needed");
    set_slurm_user
        ->add_option("--db,--database", admin.db_path, "SQLite database file or postgresql:// URI")
        ->required();
    set_slurm_user->add_option("--org", admin.org_slug, "Organisation slug, e.g. acme")->required();
    set_slurm_user->add_option("--email", admin.email, "The member's email")->required();
    set_slurm_user->add_option("--slurm-user", admin.slurm_user, "The SLURM user name")->required();

    CLI11_PARSE(app, argc, argv);

    if (serve_cmd->parsed()) {
      KeepFreedMemoryForReuse();
      return expanse::server::RunServe(serve);
    }
    if (!admin_cmd->parsed()) {
      std::fputs(app.help().c_str(), stderr);
      std::fputs("expanse-server: name a command: serve or admin\n", stderr);
      return 2;
    }
    if (set_slurm_user->parsed())
      return expanse::server::RunSetSlurmUser(admin);
    expanse::Result<std::string> password = ReadPassword(password_env, password_stdin);
    if (!password.ok())
      return Fail(password.status());
    admin.password = *password;
    if (bootstrap->parsed())
      return expanse::server::RunBootstrap(admin);
    return expanse::server::RunAddUser(admin);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse-server: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}
