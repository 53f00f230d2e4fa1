// The query API: jobs with requested versus used, one job's per-GPU timelines, nodes and GPUs.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "http/error.h"
#include "server/job_usage.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr int kDefaultTimelinePoints = 1000;
constexpr int64_t kMaxTimelinePoints = 10'000;
// The points one timeline answer holds at most, over all its series (about 110 bytes each as a
// JSON tree): `points` is shared out when series x points would pass it. A job has at most
// kMaxRowsPerJob GPUs, and hosts from as many allocations and node events, so each series
// still gets at least 30 points.
constexpr int64_t kMaxTimelineTotalPoints = 1'000'000;
static_assert(kMaxTimelineTotalPoints / (2 * store::JobStore::kMaxRowsPerJob) >= 30);

json UsageJson(const JobUsage& u) {
  auto or_null = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  return {{"gpus_allocated", u.gpus_allocated},
          {"gpus_active", u.gpus_active},
          {"has_gpu_samples", u.has_gpu_samples},
          {"sm_mean", u.sm_mean},
          {"sm_peak", u.sm_peak},
          {"sm_active_mean", or_null(u.sm_active_mean)},
          {"tensor_active_mean", or_null(u.tensor_active_mean)},
          {"counters_source",
           u.counters_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(u.counters_source)},
          {"gpu_mem_peak_mib", u.gpu_mem_peak_mib},
          {"allocated_gpu_hours", u.allocated_gpu_hours},
          {"idle_gpu_hours", u.idle_gpu_hours},
          {"idle_tail_ms", u.idle_tail_ms},
          {"cpu_efficiency", or_null(u.cpu_efficiency)},
          {"mem_efficiency", or_null(u.mem_efficiency)}};
}

json JobJson(const store::JobRecord& j) {
  return {{"compute_id", j.compute_id},
          {"job_id", j.job_id},
          {"name", j.name},
          {"user", j.user},
          {"account", j.account},
          {"partition", j.partition},
          {"state", j.state},
          {"nodes", j.nodes},
          {"submit_ms", j.submit_ms},
          {"start_ms", j.start_ms},
          {"end_ms", j.end_ms},
          {"requested",
           {{"nodes", j.req_nodes},
            {"cpus", j.req_cpus},
            {"gpus", j.req_gpus},
            {"mem_mib", j.req_mem_mib},
            {"time_limit_s", j.time_limit_s}}}};
}

// A job as the job list and the job page show it: its record, usage and hosts.
json JobWithUsageJson(const store::JobRecord& job, const JobWithUsage& details) {
  json out = JobJson(job);
  out["used"] = UsageJson(details.usage);
  out["hosts"] = details.hosts;
  if (details.usage_omitted)
    out["used_omitted"] = true;
  return out;
}

}  // namespace

void RegisterQueryRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  listener.Get("/api/v1/orgs/:org/jobs", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      ControlPlane::JobReader reader;
      EXPANSE_ASSIGN_OR_RETURN(auto computes,
                               ctx->control.ListComputesForJobs(p, req.PathParam("org"), &reader));
      store::JobFilter f;
      auto wanted = req.QueryParam("compute");
      for (const auto& c : computes) {
        if (!wanted || *wanted == c.id)
          f.compute_ids.push_back(c.id);
      }
      if (f.compute_ids.empty())
        return json{{"jobs", json::array()}};
      for (auto [name, dst] : {std::pair{"user", &f.user}, std::pair{"account", &f.account},
                               std::pair{"partition", &f.partition}}) {
        if (auto v = req.QueryParam(name))
          *dst = std::string(*v);
      }
      if (reader.only_user) {
        // A jobs:own token: its user's jobs, and a clear refusal when it asks for another's.
        if (!f.user.empty() && f.user != *reader.only_user) {
          return PermissionDeniedError("this token reads only the jobs of SLURM user " +
                                       *reader.only_user)
              .WithReason("forbidden");
        }
        f.user = *reader.only_user;
      }
      if (auto v = req.QueryParam("state"))
        f.states.push_back(std::string(*v));
      EXPANSE_ASSIGN_OR_RETURN(f.from_ms, IntQueryParam(req, "from", 0, 0, INT64_MAX));
      EXPANSE_ASSIGN_OR_RETURN(f.to_ms, IntQueryParam(req, "to", 0, 0, INT64_MAX));
      EXPANSE_ASSIGN_OR_RETURN(int64_t limit, IntQueryParam(req, "limit", 100, 1, 1000));
      EXPANSE_ASSIGN_OR_RETURN(int64_t offset, IntQueryParam(req, "offset", 0, 0, 1'000'000));
      f.limit = static_cast<int>(limit);
      f.offset = static_cast<int>(offset);
      EXPANSE_ASSIGN_OR_RETURN(auto jobs, ctx->jobs->ListJobs(f));
      EXPANSE_ASSIGN_OR_RETURN(auto details,
                               JobsWithUsage(*ctx->jobs, *ctx->tsdb, jobs, ctx->clock.NowMs()));
      json list = json::array();
      for (size_t i = 0; i < jobs.size(); ++i)
        list.push_back(JobWithUsageJson(jobs[i], details[i]));
      return json{{"jobs", list}};
    });
  });

  listener.Get("/api/v1/computes/:id/jobs/:job", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const ReadableJob readable, LookUpReadableJob(*ctx, p, req));
      const store::Compute& compute = readable.compute;
      const store::JobRecord& job = readable.job;
      EXPANSE_ASSIGN_OR_RETURN(auto allocations, ctx->jobs->GpuAllocations(compute.id, job.job_id));
      EXPANSE_ASSIGN_OR_RETURN(auto events, ctx->jobs->NodeEvents(compute.id, job.job_id));
      JobWithUsage details{JobHosts(job, allocations, events), {}};
      EXPANSE_ASSIGN_OR_RETURN(details.usage, ComputeJobUsage(*ctx->tsdb, job, allocations,
                                                              details.hosts, ctx->clock.NowMs()));
      json out = JobWithUsageJson(job, details);
      json gpus = json::array();
      for (const auto& a : allocations) {
        gpus.push_back({{"host", a.host},
                        {"gpu_uuid", a.gpu_uuid},
                        {"gpu_index", a.gpu_index},
                        {"gpu_minor", a.gpu_minor},
                        {"from_ms", a.from_ms},
                        {"to_ms", a.to_ms}});
      }
      json ev = json::array();
      for (const auto& e : events) {
        ev.push_back({{"host", e.host}, {"kind", e.kind}, {"at_ms", e.at_ms}});
      }
      out["gpus"] = gpus;
      out["events"] = ev;
      return out;
    });
  });

  // Per-GPU series of one metric over each GPU's allocation to the job, downsampled by the
  // server.
  listener.Get("/api/v1/computes/:id/jobs/:job/timeline", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const ReadableJob readable, LookUpReadableJob(*ctx, p, req));
      const store::Compute& compute = readable.compute;
      const store::JobRecord& job = readable.job;
      std::string metric(req.QueryParam("metric").value_or("gpu.sm_util"));
      EXPANSE_ASSIGN_OR_RETURN(int64_t points, IntQueryParam(req, "points", kDefaultTimelinePoints,
                                                             1, kMaxTimelinePoints));
      EXPANSE_ASSIGN_OR_RETURN(auto allocations, ctx->jobs->GpuAllocations(compute.id, job.job_id));
      int64_t from = job.start_ms;
      int64_t to = job.end_ms != 0 ? job.end_ms : ctx->clock.NowMs();
      // What is read, one series each, before any is: `points` is then shared out over them.
      const bool job_metric = metric.starts_with("job.");
      std::vector<std::string> hosts;
      std::vector<std::pair<const store::GpuAllocation*, Window>> held;
      if (from != 0 && to > from && job_metric) {
        // A job's own series (cgroup CPU and memory, GPU memory of its processes) are kept per
        // host under the device "job/<job id>": one entry per host the job ran on.
        EXPANSE_ASSIGN_OR_RETURN(auto events, ctx->jobs->NodeEvents(compute.id, job.job_id));
        hosts = JobHosts(job, allocations, events);
      } else if (from != 0 && to > from) {
        // A GPU's series are the node's, whichever job held it: each is read only while this
        // job held that GPU (a requeued job's first GPU went to another user's job next).
        for (const auto& a : allocations) {
          if (!OfCurrentRun(job, a))
            continue;
          const Window window = AllocationWindow(job, a, ctx->clock.NowMs());
          if (window.to_ms > window.from_ms)
            held.emplace_back(&a, window);
        }
      }
      const int64_t series_count = static_cast<int64_t>(job_metric ? hosts.size() : held.size());
      if (series_count > 0)
        points = std::clamp<int64_t>(kMaxTimelineTotalPoints / series_count, 1, points);
      json series = json::array();
      auto points_json = [](const std::vector<tsdb::Bucket>& buckets) {
        json pts = json::array();
        for (const auto& b : buckets)
          pts.push_back({b.start_ms, b.min, b.max, b.mean});
        return pts;
      };
      const std::string device = "job/" + job.job_id;
      for (const std::string& host : hosts) {
        EXPANSE_ASSIGN_OR_RETURN(auto buckets,
                                 ctx->tsdb->Query({compute.id, host, device, metric}, from, to,
                                                  static_cast<int>(points)));
        series.push_back({{"host", host}, {"device", device}, {"points", points_json(buckets)}});
      }
      for (const auto& [a, window] : held) {
        EXPANSE_ASSIGN_OR_RETURN(
            auto buckets, ctx->tsdb->Query({compute.id, a->host, a->gpu_uuid, metric},
                                           window.from_ms, window.to_ms, static_cast<int>(points)));
        series.push_back({{"host", a->host},
                          {"gpu_uuid", a->gpu_uuid},
                          {"from_ms", window.from_ms},
                          {"to_ms", window.to_ms},
                          {"points", points_json(buckets)}});
      }
      json out = {{"metric", metric},
                  {"from_ms", from},
                  {"to_ms", to},
                  {"points_per_series", points},
                  {"columns", {"t_ms", "min", "max", "mean"}}};
      out["series"] = std::move(series);
      return out;
    });
  });

  // Nodes and GPUs as the controller last reported them.
  listener.Get("/api/v1/computes/:id/nodes", [ctx](const http::Request& req) {
    return AnswerConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(auto compute, ctx->control.GetCompute(p, req.PathParam("id")));
      auto hb = ctx->control.LatestHeartbeat(compute.id);
      if (!hb.ok()) {
        if (hb.status().code() != StatusCode::kNotFound)
          return hb.status();
        return json{{"nodes", json::array()}, {"workers", nullptr}};
      }
      // Stored, but written by a compute: read with the same limits, never thrown on.
      const json doc = ParseStoredJson(hb->body_json);
      const bool object = doc.is_object();
      return json{{"nodes", object && doc.contains("nodes") ? doc["nodes"] : json::array()},
                  {"workers", object && doc.contains("workers") ? doc["workers"] : json(nullptr)},
                  {"reported_at_ms", hb->received_at_ms}};
    });
  });
}

}  // namespace expanse::server
