// The `serve` and `admin` commands of expanse-server, behind its thin main.
#ifndef EXPANSE_SERVER_SERVE_H_
#define EXPANSE_SERVER_SERVE_H_

#include <string>

#include "server/server_app.h"

namespace expanse::server {

struct ServeFlags {
  ServerOptions options;
  std::string install_token_ttl = "1h";
  std::string stale_after = "5m";
  std::string retention = "0";  // telemetry kept forever
  std::string segment_retention = "30d";
  std::string stack_retention = "30d";
  // How often the alert rules are evaluated (alert_evaluator.h).
  std::string alert_interval = "1m";
  // "username:password" on one line, for the SMTP server; "" = no login.
  std::string smtp_credentials_file;
  std::string segment_s3_credentials_file;  // access-key:secret-key
  std::string metrics_token_file;  // --metrics-token-file: the token GET /metrics answers to
  // --telemetry-url: the remote store's root (VictoriaMetrics single-node), giving the write
  // and query URLs that --telemetry-write-url and --telemetry-query-url do not.
  std::string telemetry_url;
  std::string telemetry_token_file;  // its bearer token, mode 600
  std::string forward_token_file;    // --forward-token-file: the forwarding receiver's token
};

// Serves until SIGINT or SIGTERM, then shuts down gracefully. Returns the process exit code.
int RunServe(ServeFlags flags);

// "https://host:port" for a listen address; a wildcard host becomes this machine's name.
std::string PublicUrl(const std::string& listen_address, int bound_port, bool tls);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_SERVE_H_
