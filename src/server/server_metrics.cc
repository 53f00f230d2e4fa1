#include "server/server_metrics.h"

#include <cstdio>
#include <string>

namespace expanse::server {
namespace {

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    out_ += name;
    if (!labels.empty())
      out_ += "{" + labels + "}";
    out_ += " " + Number(value) + "\n";
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string Label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + EscapeLabelValue(value) + "\"";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string RenderMetrics(const MetricsSnapshot& s) {
  Writer w;
  w.Family("expanse_build_info", "gauge", "The expanse-server version this replica runs.");
  w.Sample("expanse_build_info", Label("version", s.version), 1);
  w.Family("expanse_process_start_time_seconds", "gauge",
           "When this replica started, in seconds since the Unix epoch.");
  w.Sample("expanse_process_start_time_seconds", "", s.start_time_s);
  w.Family("expanse_store_up", "gauge", "Whether this replica's store answered the scrape's read.");
  w.Sample("expanse_store_up", "", s.store_up ? 1 : 0);
  w.Family("expanse_store_ping_seconds", "gauge", "How long the store took to answer that read.");
  w.Sample("expanse_store_ping_seconds", "", s.store_ping_s);
  w.Family("expanse_ingest_batches_total", "counter",
           "Ingest batches this replica answered, by outcome: stored, duplicate (already "
           "stored), refused (4xx) and failed (5xx).");
  w.Sample("expanse_ingest_batches_total", Label("outcome", "stored"),
           static_cast<double>(s.ingest_stored));
  w.Sample("expanse_ingest_batches_total", Label("outcome", "duplicate"),
           static_cast<double>(s.ingest_duplicate));
  w.Sample("expanse_ingest_batches_total", Label("outcome", "refused"),
           static_cast<double>(s.ingest_refused));
  w.Sample("expanse_ingest_batches_total", Label("outcome", "failed"),
           static_cast<double>(s.ingest_failed));
  w.Family("expanse_ingest_samples_total", "counter",
           "Samples of the batches this replica stored.");
  w.Sample("expanse_ingest_samples_total", "", static_cast<double>(s.ingest_samples));
  w.Family("expanse_heartbeats_total", "counter", "Heartbeats this replica recorded.");
  w.Sample("expanse_heartbeats_total", "", static_cast<double>(s.heartbeats));
  w.Family("expanse_requests_busy_total", "counter",
           "Requests asked to come back (503 with Retry-After) because every slot of their kind "
           "was taken: heavy console reads (queries) and trace segment parses (segments).");
  w.Sample("expanse_requests_busy_total", Label("kind", "queries"),
           static_cast<double>(s.queries_busy));
  w.Sample("expanse_requests_busy_total", Label("kind", "segments"),
           static_cast<double>(s.segments_busy));
  if (s.forwarding) {
    w.Family("expanse_forward_batches_total", "counter",
             "Stored batches forwarded to the site's remote-write receiver, by outcome: sent, "
             "or dropped (refused by it, or pushed out of the full queue).");
    w.Sample("expanse_forward_batches_total", Label("outcome", "sent"),
             static_cast<double>(s.forward_sent));
    w.Sample("expanse_forward_batches_total", Label("outcome", "dropped"),
             static_cast<double>(s.forward_dropped));
    w.Family("expanse_forward_samples_total", "counter", "Samples of the forwarded batches.");
    w.Sample("expanse_forward_samples_total", "", static_cast<double>(s.forward_sent_samples));
    w.Family("expanse_forward_failed_attempts_total", "counter",
             "Forwarding sends that failed and will be tried again (receiver down, 5xx, 429).");
    w.Sample("expanse_forward_failed_attempts_total", "",
             static_cast<double>(s.forward_failed_attempts));
    w.Family("expanse_forward_queue_batches", "gauge", "Batches waiting to be forwarded.");
    w.Sample("expanse_forward_queue_batches", "", static_cast<double>(s.forward_queued));
  }
  if (s.remote_telemetry) {
    w.Family("expanse_remote_write_duration_seconds", "summary",
             "Remote writes of groups of batches to the telemetry store: their count and time "
             "(with the wait for a connection), failed ones too.");
    w.Sample("expanse_remote_write_duration_seconds_sum", "", s.remote_write_seconds);
    w.Sample("expanse_remote_write_duration_seconds_count", "",
             static_cast<double>(s.remote_groups));
    w.Family("expanse_remote_write_failures_total", "counter",
             "Remote writes the telemetry store failed or refused (their batches were answered "
             "so, and are sent again).");
    w.Sample("expanse_remote_write_failures_total", "",
             static_cast<double>(s.remote_failed_writes));
    w.Family("expanse_remote_write_batches_total", "counter",
             "Ingest batches sent in those writes (per write: how well batches are grouped).");
    w.Sample("expanse_remote_write_batches_total", "", static_cast<double>(s.remote_group_batches));
    w.Family("expanse_remote_write_waiting_batches", "gauge",
             "Ingest batches waiting now for a group to write them.");
    w.Sample("expanse_remote_write_waiting_batches", "", static_cast<double>(s.remote_waiting));
    w.Family("expanse_remote_write_unmarked_batches", "gauge",
             "Batches written and answered whose mark in the database waits for the next "
             "group's claim.");
    w.Sample("expanse_remote_write_unmarked_batches", "", static_cast<double>(s.remote_unmarked));
  }

  w.Family("expanse_compute_up", "gauge",
           "Per compute: 1 while its state is active (heartbeats arrive), else 0.");
  for (const ComputeMetrics& c : s.computes) {
    w.Sample("expanse_compute_up", Label("compute", c.id) + "," + Label("state", c.state),
             c.state == "active" ? 1 : 0);
  }
  w.Family("expanse_compute_heartbeat_age_seconds", "gauge",
           "Per compute: seconds since its latest heartbeat (absent when never heard from).");
  for (const ComputeMetrics& c : s.computes) {
    if (c.heartbeat_age_s >= 0)
      w.Sample("expanse_compute_heartbeat_age_seconds", Label("compute", c.id), c.heartbeat_age_s);
  }
  w.Family("expanse_compute_gpus", "gauge",
           "Per compute: its GPUs by use at the latest heartbeat (free, busy, allocated_idle: "
           "allocated with nothing of its job on it, unallocated_in_use, unknown).");
  for (const ComputeMetrics& c : s.computes) {
    for (const auto& [state, count] : c.gpus_by_state) {
      w.Sample("expanse_compute_gpus", Label("compute", c.id) + "," + Label("state", state),
               static_cast<double>(count));
    }
  }
  w.Family("expanse_compute_gpu_jobs", "gauge",
           "Per compute: distinct jobs holding GPUs at the latest heartbeat.");
  for (const ComputeMetrics& c : s.computes)
    w.Sample("expanse_compute_gpu_jobs", Label("compute", c.id),
             static_cast<double>(c.jobs_holding_gpus));
  w.Family("expanse_metrics_computes_left_out", "gauge",
           "Computes beyond the per-scrape cap, left out of the per-compute families.");
  w.Sample("expanse_metrics_computes_left_out", "", static_cast<double>(s.computes_left_out));
  return w.Take();
}

}  // namespace expanse::server
