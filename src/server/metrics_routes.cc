// GET /metrics: this replica's health and its computes' latest heartbeats, for Prometheus.
#include <chrono>
#include <set>
#include <string>

#include "core/version.h"
#include "crypto/hash.h"
#include "server/routes.h"

namespace expanse::server {
namespace {

// A compute's GPUs by use state and the jobs on them, from its latest heartbeat's nodes[]
// (docs/formats/heartbeat.md): what the controller saw at its last collection.
void AddHeartbeatFigures(const nlohmann::json& body, ComputeMetrics& out) {
  const auto nodes = body.find("nodes");
  if (nodes == body.end() || !nodes->is_array())
    return;
  std::set<std::string> jobs;
  for (const nlohmann::json& node : *nodes) {
    const auto gpus = node.find("gpus");
    if (gpus == node.end() || !gpus->is_array())
      continue;
    for (const nlohmann::json& gpu : *gpus) {
      std::string state = "unknown";
      if (const auto use = gpu.find("use"); use != gpu.end() && use->is_object()) {
        if (const auto s = use->find("state"); s != use->end() && s->is_string())
          state = s->get<std::string>();
        if (const auto held = use->find("jobs"); held != use->end() && held->is_array()) {
          for (const nlohmann::json& j : *held) {
            if (j.is_string())
              jobs.insert(j.get<std::string>());
          }
        }
      }
      // Only the documented states become label values: a hostile heartbeat cannot mint series.
      if (state != "free" && state != "busy" && state != "allocated_idle" &&
          state != "unallocated_in_use")
        state = "unknown";
      ++out.gpus_by_state[state];
    }
  }
  out.jobs_holding_gpus = static_cast<int64_t>(jobs.size());
}

MetricsSnapshot Gather(RouteContext& ctx, store::Store& store, int64_t start_ms) {
  MetricsSnapshot s;
  s.version = std::string(ReleaseVersion());
  s.start_time_s = static_cast<double>(start_ms) / 1000.0;
  const auto before = std::chrono::steady_clock::now();
  s.store_up = store.Ping().ok();
  s.store_ping_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  if (ctx.counters != nullptr) {
    s.ingest_stored = ctx.counters->ingest_stored.load(std::memory_order_relaxed);
    s.ingest_duplicate = ctx.counters->ingest_duplicate.load(std::memory_order_relaxed);
    s.ingest_refused = ctx.counters->ingest_refused.load(std::memory_order_relaxed);
    s.ingest_failed = ctx.counters->ingest_failed.load(std::memory_order_relaxed);
    s.ingest_samples = ctx.counters->ingest_samples.load(std::memory_order_relaxed);
    s.heartbeats = ctx.counters->heartbeats.load(std::memory_order_relaxed);
    s.queries_busy = ctx.counters->queries_busy.load(std::memory_order_relaxed);
    s.segments_busy = ctx.counters->segments_busy.load(std::memory_order_relaxed);
  }
  if (ctx.forwarder != nullptr) {
    const promstore::RemoteWriteForwarder::Stats f = ctx.forwarder->stats();
    s.forwarding = true;
    s.forward_sent = f.sent_batches;
    s.forward_sent_samples = f.sent_samples;
    s.forward_dropped = f.dropped_batches;
    s.forward_failed_attempts = f.failed_attempts;
    s.forward_queued = f.queued_batches;
  }
  if (ctx.remote_telemetry != nullptr) {
    const promstore::RemoteTelemetryStore::Stats r = ctx.remote_telemetry->stats();
    s.remote_telemetry = true;
    s.remote_groups = r.groups;
    s.remote_group_batches = r.group_batches;
    s.remote_failed_writes = r.failed_writes;
    s.remote_write_seconds = r.write_seconds;
    s.remote_waiting = r.waiting_batches;
    s.remote_unmarked = r.unmarked_batches;
  }
  if (!s.store_up)
    return s;
  // One more than the cap tells whether some were left out.
  auto computes = store.ListAllComputes(static_cast<int>(kMaxMetricComputes) + 1);
  if (!computes.ok())
    return s;
  if (computes->size() > kMaxMetricComputes) {
    s.computes_left_out = 1;  // at least; counting them all would read every row
    computes->resize(kMaxMetricComputes);
  }
  const int64_t now_ms = ctx.clock.NowMs();
  for (const store::Compute& c : *computes) {
    ComputeMetrics m;
    m.id = c.id;
    m.state = std::string(store::ComputeStateName(c.state));
    if (c.last_heartbeat_ms > 0)
      m.heartbeat_age_s =
          static_cast<double>(std::max<int64_t>(0, now_ms - c.last_heartbeat_ms)) / 1000.0;
    if (c.state != store::ComputeState::kDeprovisioned && c.last_heartbeat_ms > 0) {
      if (auto hb = store.LatestHeartbeat(c.id); hb.ok())
        AddHeartbeatFigures(ParseStoredJson(hb->body_json), m);
    }
    s.computes.push_back(std::move(m));
  }
  return s;
}

}  // namespace

void RegisterMetricsRoute(http::Listener& listener, RouteContext& context, store::Store& store,
                          std::string token, int64_t start_ms) {
  RouteContext* ctx = &context;
  listener.Get("/metrics",
               [ctx, &store, token = std::move(token), start_ms](const http::Request& req) {
                 // Without the token the route is as absent as any unknown one (the listener's own
                 // 404).
                 if (token.empty() || !crypto::ConstantTimeEquals(BearerToken(req), token))
                   return http::ErrorResponse(404, "not_found", "no route for GET \"/metrics\"");
                 http::Response res;
                 res.content_type = "text/plain; version=0.0.4; charset=utf-8";
                 res.body = RenderMetrics(Gather(*ctx, store, start_ms));
                 return res;
               });
}

}  // namespace expanse::server
