// The server's own health for Prometheus (GET /metrics, docs/scaling.md): what this replica
// took in (ingest batches by outcome, samples, heartbeats), whether its store answers and how
// fast, and per compute what its latest heartbeat says (how long ago, its GPUs by use state,
// the jobs holding them). Labels are bounded: per compute (at most kMaxMetricComputes), per
// outcome and per GPU use state, never per job, node or GPU.
#ifndef EXPANSE_SERVER_SERVER_METRICS_H_
#define EXPANSE_SERVER_SERVER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace expanse::server {

// Counted by the routes as requests are answered; read at each scrape.
struct ServerCounters {
  std::atomic<uint64_t> ingest_stored{0};     // batches stored
  std::atomic<uint64_t> ingest_duplicate{0};  // batches already stored (a retry)
  std::atomic<uint64_t> ingest_refused{0};    // answered 4xx: the sender must change the batch
  std::atomic<uint64_t> ingest_failed{0};     // answered 5xx: the sender retries
  std::atomic<uint64_t> ingest_samples{0};    // samples of the stored batches
  std::atomic<uint64_t> heartbeats{0};        // heartbeats recorded
  // Requests asked to come back because their kind's slots were all taken (503 with
  // Retry-After): heavy console reads (queries_busy) and trace segment parses (segments_busy).
  std::atomic<uint64_t> queries_busy{0};
  std::atomic<uint64_t> segments_busy{0};
};

inline constexpr size_t kMaxMetricComputes = 1000;

// One compute as its latest heartbeat shows it.
struct ComputeMetrics {
  std::string id;
  std::string state;                             // registered, active, stale, deprovisioned
  double heartbeat_age_s = -1;                   // -1: never heard from
  std::map<std::string, int64_t> gpus_by_state;  // free, busy, allocated_idle, ...
  int64_t jobs_holding_gpus = 0;                 // distinct jobs on its GPUs at the last collection
};

struct MetricsSnapshot {
  std::string version;
  double start_time_s = 0;
  bool store_up = false;
  double store_ping_s = 0;
  uint64_t ingest_stored = 0, ingest_duplicate = 0, ingest_refused = 0, ingest_failed = 0;
  uint64_t ingest_samples = 0, heartbeats = 0;
  uint64_t queries_busy = 0, segments_busy = 0;
  // --forward-remote-write, when on.
  bool forwarding = false;
  uint64_t forward_sent = 0, forward_dropped = 0, forward_failed_attempts = 0;
  uint64_t forward_sent_samples = 0, forward_queued = 0;
  // --telemetry-store remote: its writes (promstore::RemoteTelemetryStore::Stats).
  bool remote_telemetry = false;
  uint64_t remote_groups = 0, remote_group_batches = 0, remote_failed_writes = 0;
  double remote_write_seconds = 0;
  uint64_t remote_waiting = 0, remote_unmarked = 0;
  std::vector<ComputeMetrics> computes;  // at most kMaxMetricComputes, by id
  size_t computes_left_out = 0;          // beyond the cap
};

// The Prometheus text exposition format (version 0.0.4) of `snapshot`.
std::string RenderMetrics(const MetricsSnapshot& snapshot);

// A label value escaped as the format wants (backslash, double quote, line feed).
std::string EscapeLabelValue(const std::string& value);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_SERVER_METRICS_H_
