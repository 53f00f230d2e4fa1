// The idle ledger API: one job's requested, allocated, active and idle GPU-seconds per GPU, and
// the same rolled up per user, account or partition over a window, as JSON or CSV.
// Definitions: docs/formats/idle-ledger.md.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "server/efficiency_rollup.h"
#include "server/idle_ledger.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "wire/field_reader.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr int64_t kDefaultWindowMs = 7 * 24 * 3'600'000LL;

json Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

json IdleShare(const LedgerTotals& t) {
  if (t.allocated_ms <= 0)
    return nullptr;
  return static_cast<double>(t.idle_ms()) / static_cast<double>(t.allocated_ms);
}

// The figures of a job, a group or a whole rollup.
json TotalsJson(const LedgerTotals& t) {
  return {{"gpus", t.gpus},
          {"never_used_gpus", t.never_used_gpus},
          {"requested_gpu_s", Seconds(t.requested_ms)},
          {"allocated_gpu_s", Seconds(t.allocated_ms)},
          {"sampled_gpu_s", Seconds(t.sampled_ms)},
          {"active_gpu_s", Seconds(t.active_ms)},
          {"idle_gpu_s", Seconds(t.idle_ms())},
          {"idle_share", IdleShare(t)}};
}

json GpuJson(const GpuLedger& g) {
  return {{"host", g.host},
          {"gpu_uuid", g.gpu_uuid},
          {"gpu_index", g.gpu_index},
          {"from_ms", g.from_ms},
          {"to_ms", g.to_ms},
          {"counted_from_ms", g.counted_from_ms},
          {"counted_to_ms", g.counted_to_ms},
          {"allocated_gpu_s", Seconds(g.allocated_ms)},
          {"sampled_gpu_s", Seconds(g.sampled_ms)},
          {"active_gpu_s", Seconds(g.active_ms)},
          {"idle_gpu_s", Seconds(g.idle_ms())},
          {"never_used", g.never_used()}};
}

json JobLedgerJson(const store::JobRecord& job, const JobLedger& ledger, int64_t now_ms) {
  json gpus = json::array();
  for (const GpuLedger& g : ledger.gpus)
    gpus.push_back(GpuJson(g));
  return {{"compute_id", job.compute_id},
          {"job_id", job.job_id},
          {"user", job.user},
          {"account", job.account},
          {"partition", job.partition},
          {"state", job.state},
          {"start_ms", job.start_ms},
          {"end_ms", job.end_ms},
          {"as_of_ms", now_ms},
          {"bucket_ms", kLedgerBucketMs},
          {"requested_gpus", ledger.requested_gpus},
          {"totals", TotalsJson(ledger.totals)},
          {"gpus", gpus}};
}

json RollupJson(const Rollup& rollup, const RollupOptions& options) {
  json groups = json::array();
  for (const RollupGroup& g : rollup.groups) {
    json entry = TotalsJson(g.totals);
    entry["key"] = g.key;
    entry["jobs"] = g.jobs;
    groups.push_back(std::move(entry));
  }
  json totals = TotalsJson(rollup.totals);
  totals["jobs"] = rollup.jobs;
  json out = {{"group_by", LedgerGroupByName(options.group_by)},
              {"from_ms", options.window.from_ms},
              {"to_ms", options.window.to_ms},
              {"as_of_ms", options.now_ms},
              {"bucket_ms", kLedgerBucketMs},
              {"groups", groups},
              {"totals", totals},
              {"jobs_scanned", rollup.jobs_scanned},
              {"job_limit", options.max_jobs},
              {"truncated", rollup.truncated}};
  if (rollup.truncated) {
    out["truncated_reason"] =
        "more than " + std::to_string(options.max_jobs) +
        " jobs overlap the window; only the most recently started " +
        std::to_string(options.max_jobs) +
        " were counted. Narrow the window, name a compute, or raise limit (at most " +
        std::to_string(kMaxRollupJobs) + ")";
  }
  return out;
}

Status BadParameter(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("invalid_argument");
}

// Whether the answer is CSV: format=csv, or no format and an Accept header naming text/csv.
Result<bool> WantsCsv(const http::Request& req) {
  if (auto format = req.QueryParam("format")) {
    if (*format == "csv")
      return true;
    if (*format == "json")
      return false;
    return BadParameter("format must be json or csv");
  }
  const auto accept = req.Header("Accept");
  return accept && accept->find("text/csv") != std::string_view::npos;
}

// The rollup's parameters, checked. Computes as in the job list: the organisation's that the
// caller may see, or the one named by compute= among them (none: nothing to count).
Result<RollupOptions> ParseRollupRequest(RouteContext& ctx, const http::Request& req,
                                         const Principal& p) {
  EXPANSE_ASSIGN_OR_RETURN(auto computes, ctx.control.ListComputes(p, req.PathParam("org")));
  RollupOptions o;
  const std::string_view group_by = req.QueryParam("group_by").value_or("user");
  const auto parsed = ParseLedgerGroupBy(group_by);
  if (!parsed)
    return BadParameter("group_by must be user, account or partition");
  o.group_by = *parsed;
  o.now_ms = ctx.clock.NowMs();
  EXPANSE_ASSIGN_OR_RETURN(o.window.to_ms, IntQueryParam(req, "to", o.now_ms, 1, wire::kMaxTimeMs));
  EXPANSE_ASSIGN_OR_RETURN(
      o.window.from_ms,
      IntQueryParam(req, "from", std::max<int64_t>(0, o.window.to_ms - kDefaultWindowMs), 0,
                    wire::kMaxTimeMs));
  if (o.window.from_ms >= o.window.to_ms)
    return BadParameter("from must be before to");
  EXPANSE_ASSIGN_OR_RETURN(int64_t limit,
                           IntQueryParam(req, "limit", kDefaultRollupJobs, 1, kMaxRollupJobs));
  o.max_jobs = static_cast<int>(limit);
  const auto wanted = req.QueryParam("compute");
  for (const auto& c : computes) {
    if (!wanted || *wanted == c.id)
      o.compute_ids.push_back(c.id);
  }
  return o;
}

http::Response AnswerRollup(RouteContext& ctx, const http::Request& req) {
  Result<Principal> principal = AuthenticateConsoleRequest(ctx, req);
  if (!principal.ok())
    return http::ErrorResponse(principal.status());
  Result<bool> csv = WantsCsv(req);
  if (!csv.ok())
    return http::ErrorResponse(csv.status());
  Result<RollupOptions> options = ParseRollupRequest(ctx, req, *principal);
  if (!options.ok())
    return http::ErrorResponse(options.status());
  std::optional<ConcurrencySlots::Slot> slot = ctx.heavy_reads != nullptr
                                                   ? ctx.heavy_reads->TryTake()
                                                   : std::nullopt;  // as AnswerHeavyConsoleJson
  if (ctx.heavy_reads != nullptr && !slot)
    return HeavyReadsBusyResponse(ctx);
  Rollup rollup;
  if (!options->compute_ids.empty()) {
    Result<Rollup> counted = RollUpLedgers(*ctx.jobs, *ctx.tsdb, *options);
    if (!counted.ok())
      return http::ErrorResponse(counted.status());
    rollup = std::move(counted).value();
  }
  if (!*csv)
    return Json(200, RollupJson(rollup, *options));
  http::Response response;
  response.content_type = "text/csv; charset=utf-8";
  response.body = RollupCsv(rollup, options->group_by);
  response.headers = {
      {"Content-Disposition", "attachment; filename=\"efficiency-" +
                                  std::string(LedgerGroupByName(options->group_by)) + ".csv\""},
      {"Expanse-Jobs-Scanned", std::to_string(rollup.jobs_scanned)},
      {"Expanse-Truncated", rollup.truncated ? "true" : "false"}};
  return response;
}

}  // namespace

void RegisterLedgerRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  listener.Get("/api/v1/computes/:id/jobs/:job/ledger", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const ReadableJob readable, LookUpReadableJob(*ctx, p, req));
      const store::Compute& compute = readable.compute;
      const store::JobRecord& job = readable.job;
      EXPANSE_ASSIGN_OR_RETURN(auto allocations, ctx->jobs->GpuAllocations(compute.id, job.job_id));
      const int64_t now_ms = ctx->clock.NowMs();
      EXPANSE_ASSIGN_OR_RETURN(auto ledgers, ComputeJobLedgers(*ctx->tsdb, {{job, allocations}},
                                                               LedgerWindow{}, now_ms));
      return JobLedgerJson(job, ledgers.front(), now_ms);
    });
  });

  listener.Get("/api/v1/orgs/:org/efficiency",
               [ctx](const http::Request& req) { return AnswerRollup(*ctx, req); });
}

}  // namespace expanse::server
