// The verdicts API: why a job's GPUs were idle or not doing useful work, per interval, with the
// evidence each rests on. Codes and rules: docs/formats/verdicts.md.
#include <string>

#include "server/job_usage.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/verdict_evidence.h"

namespace expanse::server {
namespace {

using nlohmann::json;

json VerdictJson(const Verdict& v) {
  return {{"code", v.code},         {"from_ms", v.from_ms},
          {"to_ms", v.to_ms},       {"confidence", v.confidence},
          {"gpus", v.gpus},         {"hosts", v.hosts},
          {"evidence", v.evidence}, {"suggestion", v.suggestion}};
}

}  // namespace

void RegisterVerdictRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;
  listener.Get("/api/v1/computes/:id/jobs/:job/verdicts", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      VerdictThresholds t;
      EXPANSE_ASSIGN_OR_RETURN(
          const int64_t stuck_s,
          IntQueryParam(req, "stuck_after_s", t.stuck_after_ms / 1000, 10, 7 * 86'400));
      EXPANSE_ASSIGN_OR_RETURN(
          const int64_t min_s,
          IntQueryParam(req, "min_interval_s", t.min_interval_ms / 1000, 10, 86'400));
      t.stuck_after_ms = stuck_s * 1000;
      t.min_interval_ms = min_s * 1000;
      EXPANSE_ASSIGN_OR_RETURN(const ReadableJob readable, LookUpReadableJob(*ctx, p, req));
      const store::Compute& compute = readable.compute;
      const store::JobRecord& job = readable.job;
      EXPANSE_ASSIGN_OR_RETURN(auto allocations, ctx->jobs->GpuAllocations(compute.id, job.job_id));
      EXPANSE_ASSIGN_OR_RETURN(auto events, ctx->jobs->NodeEvents(compute.id, job.job_id));
      std::map<std::string, GpuModel> models;
      if (auto heartbeat = ctx->control.LatestHeartbeat(compute.id); heartbeat.ok())
        models = GpuModelsFromHeartbeat(heartbeat->body_json);
      const int64_t now_ms = ctx->clock.NowMs();
      const std::vector<std::string> hosts = JobHosts(job, allocations, events);
      EXPANSE_ASSIGN_OR_RETURN(const JobCells cells,
                               GatherJobCells(*ctx->tsdb, job, allocations, hosts, models, now_ms));
      EXPANSE_ASSIGN_OR_RETURN(auto verdicts, JobVerdicts(*ctx->jobs, job, cells, t));
      json list = json::array();
      for (const Verdict& v : verdicts)
        list.push_back(VerdictJson(v));
      return json{{"compute_id", compute.id},
                  {"job_id", job.job_id},
                  {"as_of_ms", now_ms},
                  {"running", job.end_ms == 0},
                  {"cell_ms", cells.cell_ms},
                  {"from_ms", cells.start_ms},
                  {"to_ms", cells.cells > 0 ? cells.end_ms : cells.start_ms},
                  {"thresholds", {{"stuck_after_s", stuck_s}, {"min_interval_s", min_s}}},
                  {"verdicts", list}};
    });
  });
}

}  // namespace expanse::server
