#include "server/server_app.h"

#include <charconv>
#include <cstdio>

#include "http/self_signed.h"
#include "server/route_util.h"
#include "store/open_store.h"
#include "store/pg_store.h"
#include "tsdb/tsdb.h"

namespace expanse::server {

Result<std::pair<std::string, int>> ParseListenAddress(std::string_view address) {
  size_t colon = address.rfind(':');
  Status bad = InvalidArgumentError("listen address \"" + std::string(address) +
                                    "\" must be host:port, e.g. 127.0.0.1:8443 or [::1]:8443");
  if (colon == std::string_view::npos || colon == 0)
    return bad;
  std::string_view host = address.substr(0, colon);
  std::string_view port_text = address.substr(colon + 1);
  if (host.front() == '[') {
    if (host.back() != ']')
      return bad;
    host = host.substr(1, host.size() - 2);
  }
  int port = -1;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 0 || port > 65535 ||
      host.empty()) {
    return bad;
  }
  return std::pair{std::string(host), port};
}

Result<std::unique_ptr<ServerApp>> ServerApp::Create(ServerOptions options, Clock& clock) {
  std::unique_ptr<ServerApp> app(new ServerApp());
  app->options_ = std::move(options);
  if (app->options_.db_path.empty())
    return InvalidArgumentError("--db is required");
  if (app->options_.heavy_reads_at_once < 1)
    return InvalidArgumentError("heavy_reads_at_once must be at least 1");
  const bool remote_telemetry = app->options_.telemetry_store == "remote";
  if (!remote_telemetry && app->options_.telemetry_store != "embedded") {
    return InvalidArgumentError("--telemetry-store must be embedded or remote, not \"" +
                                app->options_.telemetry_store + "\"");
  }
  if (!remote_telemetry && store::IsPostgresUri(app->options_.db_path) &&
      app->options_.tsdb_dir.empty()) {
    return InvalidArgumentError(
        "--tsdb-dir is required with a PostgreSQL --db and the embedded telemetry store: it is "
        "a directory of this machine's (replicas share telemetry with --telemetry-store remote)");
  }
  if (remote_telemetry && !app->options_.tsdb_dir.empty())
    return InvalidArgumentError("--tsdb-dir is for the embedded telemetry store, not remote");
  if (remote_telemetry && app->options_.retention_ms != 0) {
    return InvalidArgumentError(
        "--retention is for the embedded telemetry store; a remote store keeps samples as long "
        "as its own retention says (VictoriaMetrics: -retentionPeriod)");
  }

  if (!app->options_.tls_self_signed_dir.empty()) {
    if (!app->options_.tls_cert.empty()) {
      return InvalidArgumentError("give either --tls-cert/--tls-key or --tls-self-signed");
    }
    http::SelfSignedOptions ss;
    ss.directory = app->options_.tls_self_signed_dir;
    ss.hosts = http::DefaultCertificateHosts();
    ss.hosts.insert(ss.hosts.end(), app->options_.tls_hosts.begin(), app->options_.tls_hosts.end());
    EXPANSE_ASSIGN_OR_RETURN(http::SelfSignedFiles files, http::EnsureSelfSignedCertificate(ss));
    app->cert_file_ = files.cert_file;
    app->key_file_ = files.key_file;
    app->ca_file_ = files.ca_file;
  } else {
    app->cert_file_ = app->options_.tls_cert;
    app->key_file_ = app->options_.tls_key;
  }

  EXPANSE_ASSIGN_OR_RETURN(app->store_, store::OpenStore(app->options_.db_path));
  app->control_ = std::make_unique<ControlPlane>(*app->store_, clock, app->options_.control);
  promstore::RemoteTelemetryStore* remote_store = nullptr;
  if (remote_telemetry) {
    EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<promstore::RemoteTelemetryStore> remote,
                             promstore::RemoteTelemetryStore::Open(app->options_.remote_telemetry,
                                                                   app->store_->Jobs(), clock));
    remote_store = remote.get();
    app->tsdb_ = std::move(remote);
  } else {
    tsdb::TsdbOptions to;
    to.directory =
        app->options_.tsdb_dir.empty() ? app->options_.db_path + ".tsdb" : app->options_.tsdb_dir;
    to.retention_ms = app->options_.retention_ms;
    EXPANSE_ASSIGN_OR_RETURN(app->tsdb_, tsdb::Tsdb::Open(to, clock));
  }
  // In a bucket when given one; else beside a SQLite file by default; replicas on PostgreSQL
  // keep segments only where told.
  if (!app->options_.segment_s3.url.empty()) {
    if (!app->options_.segment_dir.empty())
      return InvalidArgumentError("give either --segment-dir or --segment-s3-url, not both");
    EXPANSE_ASSIGN_OR_RETURN(app->segments_, S3SegmentStore::Open(app->options_.segment_s3));
  } else if (!app->options_.segment_dir.empty() || !store::IsPostgresUri(app->options_.db_path)) {
    EXPANSE_ASSIGN_OR_RETURN(
        app->segments_, DirectorySegmentStore::Open(app->options_.segment_dir.empty()
                                                        ? app->options_.db_path + ".segments"
                                                        : app->options_.segment_dir,
                                                    clock, app->options_.segment_keep_free_bytes));
  }
  EXPANSE_ASSIGN_OR_RETURN(
      app->limits_, RateLimits::Default(clock, app->options_.credential_requests_per_second));
  EXPANSE_ASSIGN_OR_RETURN(app->alert_sender_,
                           ChannelAlertSender::Create(app->options_.alerts, clock));
  app->context_ = std::unique_ptr<RouteContext>(new RouteContext{
      *app->control_, clock, app->limits_, !app->cert_file_.empty(), app->tsdb_.get(),
      &app->store_->Jobs(), app->options_.releases_dir, app->alert_sender_.get(), &app->counters_});
  if (!app->options_.forward.url.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(app->forwarder_,
                             promstore::RemoteWriteForwarder::Start(app->options_.forward));
    app->context_->forwarder = app->forwarder_.get();
  }
  app->context_->remote_telemetry = remote_store;
  app->context_->segments = app->segments_.get();
  app->context_->segment_parses = &app->segment_parses_;
  app->heavy_reads_ = std::make_unique<ConcurrencySlots>(app->options_.heavy_reads_at_once);
  app->context_->heavy_reads = app->heavy_reads_.get();
  app->context_->stack_retention_ms = app->options_.stack_retention_ms;
  app->context_->max_envelope_samples = app->options_.max_envelope_samples;

  EXPANSE_ASSIGN_OR_RETURN(app->control_listener_, app->ListenerFor(app->options_.control_listen));
  app->data_listener_ = app->control_listener_;
  if (!app->options_.data_listen.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(app->data_listener_, app->ListenerFor(app->options_.data_listen));
  }
  app->console_listener_ = app->control_listener_;
  if (!app->options_.console_listen.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(app->console_listener_,
                             app->ListenerFor(app->options_.console_listen));
  }
  RegisterControlPlaneRoutes(*app->control_listener_, *app->context_);
  RegisterConsoleApiRoutes(*app->console_listener_, *app->context_);
  RegisterDataPlaneRoutes(*app->data_listener_, *app->context_);
  RegisterQueryRoutes(*app->console_listener_, *app->context_);
  RegisterStackRoutes(*app->console_listener_, *app->context_);
  RegisterCaptureRoutes(*app->console_listener_, *app->context_);
  RegisterSegmentRoutes(*app->data_listener_, *app->console_listener_, *app->context_);
  RegisterLedgerRoutes(*app->console_listener_, *app->context_);
  RegisterVerdictRoutes(*app->console_listener_, *app->context_);
  RegisterAlertRoutes(*app->console_listener_, *app->context_);
  RegisterConsolePageRoutes(*app->console_listener_);
  RegisterMetricsRoute(*app->control_listener_, *app->context_, *app->store_,
                       app->options_.metrics_token, clock.NowMs());
  if (!app->options_.releases_dir.empty()) {
    EXPANSE_RETURN_IF_ERROR(RegisterReleaseMirrorRoutes(
        *app->control_listener_, app->options_.releases_dir, *app->control_));
  }
  for (auto& [address, listener] : app->listeners_) {
    std::string planes;
    if (listener.get() == app->control_listener_)
      planes += "control";
    if (listener.get() == app->data_listener_)
      planes += planes.empty() ? "data" : "+data";
    if (listener.get() == app->console_listener_)
      planes += planes.empty() ? "console" : "+console";
    RegisterHealthRoute(*listener, planes, *app->store_);
  }
  return app;
}

Result<int64_t> ServerApp::ExpireSegmentsOnce(int64_t now_ms) {
  if (segments_ == nullptr)
    return int64_t{0};
  // What crashes left, a few directories a pass, whatever the retention.
  if (const size_t swept = segments_->SweepLeftovers(kSweptDirectoriesPerPass); swept > 0)
    std::fprintf(stderr, "expanse-server: removed %zu stale temporary segment files\n", swept);
  if (options_.segment_retention_ms <= 0)
    return int64_t{0};
  return ExpireSegments(store_->Jobs(), *segments_, now_ms - options_.segment_retention_ms,
                        kSegmentRetentionBatch);
}

Result<int64_t> ServerApp::ExpireStacksOnce(int64_t now_ms, int limit) {
  if (options_.stack_retention_ms <= 0)
    return int64_t{0};
  return store_->Jobs().ExpireStacks(now_ms - options_.stack_retention_ms, limit);
}

Result<http::Listener*> ServerApp::ListenerFor(const std::string& address) {
  EXPANSE_ASSIGN_OR_RETURN(auto host_port, ParseListenAddress(address));
  // Planes given the same address share a listener; port 0 asks for a fresh port each time.
  for (auto& [addr, listener] : listeners_) {
    if (addr == address && host_port.second != 0)
      return listener.get();
  }
  http::ListenerOptions lo;
  lo.name = address;
  lo.host = host_port.first;
  lo.port = host_port.second;
  lo.cert_file = cert_file_;
  lo.key_file = key_file_;
  // Small unless a route says otherwise: only the heartbeat and ingest routes take more
  // (docs/api.md, "Limits"). A body over its route's limit is refused while it is read.
  lo.max_body_bytes = kSmallBodyBytes;
  EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<http::Listener> listener,
                           http::Listener::Create(std::move(lo)));
  listeners_.emplace_back(address, std::move(listener));
  return listeners_.back().second.get();
}

Status ServerApp::Bind() {
  for (auto& [address, listener] : listeners_) {
    if (listener->port() != 0)
      continue;
    if (Result<int> port = listener->Bind(); !port.ok()) {
      return Status(port.status().code(),
                    "cannot listen on " + address + ": " + port.status().message());
    }
  }
  return OkStatus();
}

Status ServerApp::Start() {
  EXPANSE_RETURN_IF_ERROR(Bind());
  for (auto& [address, listener] : listeners_)
    EXPANSE_RETURN_IF_ERROR(listener->Start());
  return OkStatus();
}

void ServerApp::Stop() {
  for (auto& [address, listener] : listeners_)
    listener->Stop();
}

ServerApp::~ServerApp() { Stop(); }

int ServerApp::control_port() const { return control_listener_->port(); }
int ServerApp::data_port() const { return data_listener_->port(); }
int ServerApp::console_port() const { return console_listener_->port(); }
bool ServerApp::tls() const { return !cert_file_.empty(); }

}  // namespace expanse::server
