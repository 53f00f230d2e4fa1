// The data plane over HTTP: telemetry batches from the controller daemon.
#include "http/error.h"
#include "server/ingest_batch.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace expanse::server {

namespace {

// The Expanse-Ack request header: when the answer may come (docs/formats/ingest-batch.md).
Result<tsdb::Tsdb::Ack> AckMode(const http::Request& req) {
  const std::optional<std::string_view> value = req.Header("Expanse-Ack");
  if (!value || *value == "durable")
    return tsdb::Tsdb::Ack::kDurable;
  if (*value == "received")
    return tsdb::Tsdb::Ack::kReceived;
  return InvalidArgumentError("Expanse-Ack must be \"durable\" or \"received\"")
      .WithReason("invalid_header");
}

}  // namespace

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
    Result<tsdb::Tsdb::Ack> ack = AckMode(req);
    if (!ack.ok())
      return http::ErrorResponse(ack.status());
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
    auto appended = ctx->tsdb->Append(batch->BatchId(id->compute.id), batch->series, *ack);
    if (!appended.ok())
      return http::ErrorResponse(appended.status());
    return Json(200, {{"batch_id", batch->BatchId(id->compute.id)},
                      {"duplicate", appended->duplicate},
                      {"samples", appended->samples},
                      {"jobs", batch->jobs.size()},
                      {"durable", appended->durable},
                      {"store_epoch", ctx->tsdb->epoch()},
                      {"mark", appended->mark},
                      {"durable_mark", appended->durable_mark}});
  });

  // For senders that take answers on receipt: returns once everything the store received
  // before this request is durable, with the mark that says so.
  listener.Post("/dp/v1/sync", [ctx](const http::Request& req) {
    http::Response refused;
    if (!AuthenticateCompute(*ctx, req, &refused))
      return refused;
    Result<tsdb::Tsdb::Durability> synced = ctx->tsdb->SyncAll();
    if (!synced.ok())
      return http::ErrorResponse(synced.status());
    return Json(200, {{"store_epoch", synced->epoch}, {"durable_mark", synced->durable_mark}});
  });
}

}  // namespace expanse::server
