// ServerApp: expanse-server assembled — store, control plane, and the HTTP listeners of the
// control plane, data plane and console API, on one shared address or separate ones.
#ifndef EXPANSE_SERVER_SERVER_APP_H_
#define EXPANSE_SERVER_SERVER_APP_H_

#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "http/listener.h"
#include "promstore/forwarder.h"
#include "promstore/remote_telemetry_store.h"
#include "server/alert_sender.h"
#include "server/control_plane.h"
#include "server/ingest_batch.h"
#include "server/routes.h"
#include "server/s3_segment_store.h"
#include "server/segment_store.h"
#include "store/store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::server {

struct ServerOptions {
  // The store: a SQLite file, or a postgresql:// URI that replicas share (store/open_store.h).
  std::string db_path;
  // Where the samples live: "embedded" (the default; tsdb_dir on this machine) or "remote",
  // a Prometheus-compatible store every replica shares (remote_telemetry below).
  std::string telemetry_store = "embedded";
  // The embedded telemetry store's directory; "" = db_path + ".tsdb".
  std::string tsdb_dir;
  promstore::RemoteTelemetryOptions remote_telemetry;
  // A copy of the stored samples to a site's own remote-write receiver; url "" = none.
  promstore::ForwarderOptions forward;
  int64_t retention_ms = 0;  // telemetry kept this long; 0 = forever
  // The trace segments' directory (segment_store.h); "" = db_path + ".segments".
  std::string segment_dir;
  // The free space a directory segment store leaves on its file system (at least 5 % of it):
  // a segment that would leave less is refused (507 segment_store_full).
  uint64_t segment_keep_free_bytes = DirectorySegmentStore::kDefaultKeepFreeBytes;
  // Or an S3-compatible bucket (s3_segment_store.h), when its url is given.
  S3SegmentStoreOptions segment_s3;
  // Trace segments kept this long after they arrived; 0 = forever.
  int64_t segment_retention_ms = int64_t{30} * 24 * 3600 * 1000;
  // Python stack windows kept this long after they ended; 0 = forever.
  int64_t stack_retention_ms = int64_t{30} * 24 * 3600 * 1000;
  // The samples of one request's batches, all together, that an ingest envelope's parsed
  // batches may hold (the rest are answered envelope_full, to be sent again): one batch's cap
  // by default, so a request of several batches needs no more memory than one of one.
  size_t max_envelope_samples = kMaxIngestSamples;
  // Heavy console/API reads (job lists, timelines, ledgers, verdicts, stacks, capture) that run
  // at once across the listeners; more are answered 503 queries_busy. Half of a listener's
  // eight workers: the rest stay free for sign-ins, heartbeats and ingest.
  int heavy_reads_at_once = 4;
  // Requests per second one daemon credential may sustain (ingest, heartbeats). The
  // default suits one controller; a load benchmark raises it.
  double credential_requests_per_second = RateLimits::kDefaultCredentialRequestsPerSecond;
  // host:port of each plane. An empty data or console address shares the control plane's
  // listener; equal addresses share one listener too.
  std::string control_listen = "127.0.0.1:8443";
  std::string data_listen;
  std::string console_listen;
  // TLS: a certificate chain and key, or a directory where a self-signed CA and certificate
  // are created (its ca.pem is what clients use as SSL_CERT_FILE). Neither: plain HTTP,
  // which the listeners accept only on loopback.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_self_signed_dir;
  std::vector<std::string> tls_hosts;  // extra names/IPs for the self-signed certificate
  // Served read-only at GET /releases/<name> on the control listener; "" = no mirror.
  std::string releases_dir;
  ControlPlaneOptions control;
  // How alerts leave the server (webhooks always; email with an SMTP URL).
  AlertSenderOptions alerts;
  // The bearer token /metrics answers to (--metrics-token-file); "" = no /metrics.
  std::string metrics_token;
};

class ServerApp {
 public:
  static Result<std::unique_ptr<ServerApp>> Create(ServerOptions options, Clock& clock);
  ~ServerApp();

  // Binds every listener, so a bad address fails before anything serves and ports are known.
  Status Bind();
  // Binds if needed, then serves.
  Status Start();
  // Graceful: in-flight requests finish.
  void Stop();

  // Bound ports, after Bind().
  int control_port() const;
  int data_port() const;
  int console_port() const;
  bool tls() const;
  const std::string& ca_file() const { return ca_file_; }
  ControlPlane& control() { return *control_; }
  tsdb::TelemetryStore& telemetry() { return *tsdb_; }
  store::Store& store() { return *store_; }
  AlertSender& alert_sender() { return *alert_sender_; }
  SegmentStore* segments() { return segments_.get(); }  // null: none kept
  const RateLimits& limits() const { return limits_; }
  // Forgets up to kSegmentRetentionBatch trace segments older than the retention; returns how
  // many (fewer: none is left for now). serve.cc repeats it.
  static constexpr int kSegmentRetentionBatch = 1000;
  // Each call also sweeps this many of the segment store's directories for crash leftovers.
  Result<int64_t> ExpireSegmentsOnce(int64_t now_ms);
  static constexpr size_t kSweptDirectoriesPerPass = 64;
  // Trace segment uploads parsed at once; others are answered 503 segments_busy.
  static constexpr int kSegmentParsesAtOnce = 2;
  ConcurrencySlots& segment_parses() { return segment_parses_; }
  ConcurrencySlots& heavy_reads() { return *heavy_reads_; }
  const ServerCounters& counters() const { return counters_; }
  // Rows one stack-retention transaction deletes at most: at the 40-55 k rows/s measured on
  // PostgreSQL (docs/scaling.md), a store user waits about a quarter of a second for one.
  static constexpr int kStackRetentionBatch = store::kMaxExpireStacksLimit;
  // One batch of stack retention: deletes up to `limit` windows that ended more than the
  // retention ago, oldest first, in one transaction. Returns the rows deleted (0 with the
  // retention off); fewer than `limit` means none is left for now. serve.cc repeats it.
  Result<int64_t> ExpireStacksOnce(int64_t now_ms, int limit = kStackRetentionBatch);

 private:
  ServerApp() = default;
  Result<http::Listener*> ListenerFor(const std::string& address);

  ServerOptions options_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<tsdb::TelemetryStore> tsdb_;
  std::unique_ptr<AlertSender> alert_sender_;
  std::unique_ptr<SegmentStore> segments_;
  // Segment uploads parsed at once: parsing takes many times a segment's size.
  ConcurrencySlots segment_parses_{kSegmentParsesAtOnce};
  std::unique_ptr<ConcurrencySlots> heavy_reads_;  // ServerOptions::heavy_reads_at_once
  std::unique_ptr<promstore::RemoteWriteForwarder> forwarder_;
  ServerCounters counters_;  // what /metrics reports
  RateLimits limits_;
  std::unique_ptr<RouteContext> context_;
  std::vector<std::pair<std::string, std::unique_ptr<http::Listener>>> listeners_;
  http::Listener* control_listener_ = nullptr;
  http::Listener* data_listener_ = nullptr;
  http::Listener* console_listener_ = nullptr;
  std::string cert_file_, key_file_, ca_file_;
};

// Splits "host:port" or "[v6]:port".
Result<std::pair<std::string, int>> ParseListenAddress(std::string_view address);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_SERVER_APP_H_
