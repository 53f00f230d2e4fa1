// The data plane over HTTP: telemetry batches from the controller daemon.
#include "http/error.h"
#include "server/ingest_batch.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace expanse::server {

void RegisterDataPlaneRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  // Delivery is at least once; the store sees each batch once. Job records, node events, GPU
  // allocations and stacks are idempotent upserts, written first; the samples go to the telemetry
  // store, which remembers batch ids durably. A retry after a crash between the two writes
  // repeats the upserts harmlessly and stores the samples exactly once.
  listener.Post("/dp/v1/ingest", [ctx](const http::Request& req) {
    http::Response refused;
    auto id = AuthenticateCompute(*ctx, req, &refused);
    if (!id)
      return refused;
    Result<std::string> text = DecodeIngestBody(req.Header("Content-Type").value_or(""), req.body);
    if (!text.ok())
      return http::ErrorResponse(text.status());
    Result<IngestBatch> batch = ParseIngestBatch(*text, id->compute.id);
    if (!batch.ok())
      return http::ErrorResponse(batch.status());

    if (!batch->jobs.empty()) {
      if (Status s = ctx->jobs->UpsertJobs(batch->jobs); !s.ok())
        return http::ErrorResponse(s);
    }
    if (!batch->job_events.empty()) {
      if (Status s = ctx->jobs->AddNodeEvents(batch->job_events); !s.ok()) {
        return http::ErrorResponse(s);
      }
    }
    if (!batch->gpu_allocations.empty()) {
      if (Status s = ctx->jobs->PutGpuAllocations(batch->gpu_allocations); !s.ok()) {
        return http::ErrorResponse(s);
      }
    }
    if (!batch->stacks.empty()) {
      if (Status s = ctx->jobs->PutStacks(batch->stacks); !s.ok())
        return http::ErrorResponse(s);
    }
    auto appended = ctx->tsdb->Append(batch->BatchId(id->compute.id), batch->series);
    if (!appended.ok())
      return http::ErrorResponse(appended.status());
    return Json(200, {{"batch_id", batch->BatchId(id->compute.id)},
                      {"duplicate", appended->duplicate},
                      {"samples", appended->samples},
                      {"jobs", batch->jobs.size()}});
  });
}

}  // namespace expanse::server
