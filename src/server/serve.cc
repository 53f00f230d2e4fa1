#include "server/serve.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/duration.h"

namespace expanse::server {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

int Fail(const Status& status) {
  std::fprintf(stderr, "expanse-server: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

std::string PublicUrl(const std::string& listen_address, int bound_port, bool tls) {
  auto parsed = ParseListenAddress(listen_address);
  std::string host = parsed.ok() ? parsed->first : "localhost";
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(bound_port);
}

int RunServe(ServeFlags flags) {
  auto ttl = ParseDuration(flags.install_token_ttl);
  if (!ttl.ok())
    return Fail(ttl.status());
  auto stale = ParseDuration(flags.stale_after);
  if (!stale.ok())
    return Fail(stale.status());
  if (ttl->count() <= 0)
    return Fail(InvalidArgumentError("--install-token-ttl must be positive"));
  flags.options.control.install_token_ttl_ms = ttl->count();
  flags.options.control.stale_after_ms = stale->count();
  auto retention = ParseDuration(flags.retention);
  if (!retention.ok())
    return Fail(retention.status());
  flags.options.retention_ms = retention->count();

  SystemClock clock;
  // Public URLs default to the bound listeners, so they are filled in between Bind() and Start().
  auto app = ServerApp::Create(flags.options, clock);
  if (!app.ok())
    return Fail(app.status());
  Status bound = (*app)->Bind();
  if (!bound.ok())
    return Fail(bound);
  ControlPlaneOptions& cp = (*app)->control().mutable_options();
  const ServerOptions& o = flags.options;
  if (cp.control_plane_url.empty()) {
    cp.control_plane_url = PublicUrl(o.control_listen, (*app)->control_port(), (*app)->tls());
  }
  if (cp.data_plane_url.empty()) {
    cp.data_plane_url = PublicUrl(o.data_listen.empty() ? o.control_listen : o.data_listen,
                                  (*app)->data_port(), (*app)->tls());
  }
  std::string console_url =
      PublicUrl(o.console_listen.empty() ? o.control_listen : o.console_listen,
                (*app)->console_port(), (*app)->tls());
  Status started = (*app)->Start();
  if (!started.ok())
    return Fail(started);
  std::printf("expanse-server: control plane %s\n", cp.control_plane_url.c_str());
  std::printf("expanse-server: data plane    %s\n", cp.data_plane_url.c_str());
  std::printf("expanse-server: console API   %s\n", console_url.c_str());
  if (!o.releases_dir.empty()) {
    std::printf("expanse-server: release mirror %s/releases (--releases-url)\n",
                PublicUrl(o.control_listen, (*app)->control_port(), (*app)->tls()).c_str());
  }
  if (!(*app)->ca_file().empty()) {
    std::printf("expanse-server: CA for clients (SSL_CERT_FILE): %s\n",
                std::filesystem::absolute((*app)->ca_file()).c_str());
  }
  std::fflush(stdout);

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto next_stale_check = std::chrono::steady_clock::now();
  auto next_flush = next_stale_check + std::chrono::minutes(5);
  while (!g_stop) {
    if (std::chrono::steady_clock::now() >= next_flush) {
      // Sealing head chunks bounds the WAL and the replay time after a crash.
      if (Status s = (*app)->telemetry().Flush(); !s.ok()) {
        std::fprintf(stderr, "expanse-server: telemetry flush: %s\n", s.ToString().c_str());
      }
      if (Status s = (*app)->telemetry().ApplyRetention(); !s.ok()) {
        std::fprintf(stderr, "expanse-server: telemetry retention: %s\n", s.ToString().c_str());
      }
      next_flush += std::chrono::minutes(5);
    }
    if (std::chrono::steady_clock::now() >= next_stale_check) {
      if (auto n = (*app)->control().MarkStaleComputes(); !n.ok()) {
        std::fprintf(stderr, "expanse-server: marking stale computes: %s\n",
                     n.status().message().c_str());
      }
      next_stale_check += std::chrono::seconds(15);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("expanse-server: shutting down\n");
  (*app)->Stop();
  // Seal and persist the head chunks, so the next start has no WAL to replay and the
  // telemetry directory holds exactly the data at rest.
  if (Status s = (*app)->telemetry().Flush(); !s.ok()) {
    std::fprintf(stderr, "expanse-server: telemetry flush at shutdown: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace expanse::server
