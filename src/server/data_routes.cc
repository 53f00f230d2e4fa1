// The data plane over HTTP: telemetry batches from the controller daemon.
#include <memory>
#include <string>
#include <utility>

#include "http/error.h"
#include "server/ingest_batch.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "wire/records.h"

namespace expanse::server {

namespace {

// Matches the listener's trim_heap_after_bytes for bodies as read.
constexpr size_t kTrimHeapAfterDecodedBytes = 1 << 20;

// The Expanse-Ack request header: when the answer may come (docs/formats/ingest-batch.md).
Result<tsdb::TelemetryStore::Ack> AckMode(const http::Request& req) {
  const std::optional<std::string_view> value = req.Header("Expanse-Ack");
  if (!value || *value == "durable")
    return tsdb::TelemetryStore::Ack::kDurable;
  if (*value == "received")
    return tsdb::TelemetryStore::Ack::kReceived;
  return InvalidArgumentError("Expanse-Ack must be \"durable\" or \"received\"")
      .WithReason("invalid_header");
}

// A compute over its series limit must change what it sends: 422, not the 429 of
// kResourceExhausted, which its daemon would retry for ever (docs/api.md).
http::Response TsdbErrorResponse(const Status& status) {
  if (status.reason() == "series_limit")
    return http::ErrorResponse(422, "series_limit", status.message());
  return http::ErrorResponse(status);
}

// The batch's records, each kind an idempotent upsert.
Status WriteRecords(RouteContext& ctx, const IngestBatch& batch) {
  if (!batch.jobs.empty())
    EXPANSE_RETURN_IF_ERROR(ctx.jobs->UpsertJobs(batch.jobs));
  if (!batch.job_events.empty())
    EXPANSE_RETURN_IF_ERROR(ctx.jobs->AddNodeEvents(batch.job_events));
  if (!batch.gpu_allocations.empty())
    EXPANSE_RETURN_IF_ERROR(ctx.jobs->PutGpuAllocations(batch.gpu_allocations));
  if (!batch.stacks.empty())
    EXPANSE_RETURN_IF_ERROR(ctx.jobs->PutStacks(batch.stacks));
  if (!batch.capture_windows.empty())
    EXPANSE_RETURN_IF_ERROR(ctx.jobs->PutCaptureWindows(batch.capture_windows));
  return OkStatus();
}

// The answer to a batch once the telemetry store has answered it (`unchecked_hash`: the
// sender's credential hash when the store checked it; `bearer`: that credential).
http::Response AnswerAppended(RouteContext& ctx, const IngestBatch& batch,
                              const std::string& batch_id, const std::string& unchecked_hash,
                              const std::string& bearer,
                              const Result<tsdb::TelemetryStore::AppendResult>& appended) {
  if (!appended.ok() && appended.status().reason() == "credential_revoked") {
    // Revoked since this replica last read it (or replaced): forgotten, and answered as
    // AuthenticateCredential answers (the revocation's reason), from the database.
    ctx.control.ForgetCredential(unchecked_hash);
    Result<ControlPlane::ComputeIdentity> id = ctx.control.AuthenticateCredential(bearer);
    return http::ErrorResponse(id.ok() ? appended.status() : id.status());
  }
  if (!appended.ok())
    return TsdbErrorResponse(appended.status());
  // The site's copy, sent later by the forwarder's own thread (it never holds ingest up).
  if (ctx.forwarder != nullptr && !appended->duplicate)
    ctx.forwarder->Enqueue(batch.series);
  if (ctx.counters != nullptr) {
    (appended->duplicate ? ctx.counters->ingest_duplicate : ctx.counters->ingest_stored)
        .fetch_add(1, std::memory_order_relaxed);
    if (!appended->duplicate)
      ctx.counters->ingest_samples.fetch_add(appended->samples, std::memory_order_relaxed);
  }
  return Json(200, wire::Encode(wire::IngestAnswer{.batch_id = batch_id,
                                                   .duplicate = appended->duplicate,
                                                   .samples = appended->samples,
                                                   .jobs = batch.jobs.size(),
                                                   .durable = appended->durable,
                                                   .store_epoch = ctx.tsdb->epoch(),
                                                   .mark = appended->mark,
                                                   .durable_mark = appended->durable_mark}));
}

}  // namespace

void RegisterDataPlaneRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  // Delivery is at least once; the store sees each batch once. Job records, node events, GPU
  // allocations and stacks are idempotent upserts, written first; the samples go to the telemetry
  // store, which remembers batch ids durably. A retry after a crash between the two writes
  // repeats the upserts harmlessly and stores the samples exactly once. The route is deferred:
  // the remote store answers a batch from the thread that wrote its group (AppendLater), so a
  // worker never sits waiting for other requests' writes; the embedded store answers at once.
  listener.PostDeferred(
      "/dp/v1/ingest",
      [ctx](const http::Request& req, http::Responder responder) {
        // Refusals and failures counted for /metrics by the status they were answered with.
        auto answer = [ctx, responder](http::Response response) {
          if (ctx->counters != nullptr && response.status >= 400) {
            (response.status >= 500 ? ctx->counters->ingest_failed : ctx->counters->ingest_refused)
                .fetch_add(1, std::memory_order_relaxed);
          }
          responder.Respond(std::move(response));
        };
        http::Response refused;
        std::optional<IngestSender> sender = AuthenticateIngestSender(*ctx, req, &refused);
        if (!sender)
          return answer(std::move(refused));
        Result<tsdb::TelemetryStore::Ack> ack = AckMode(req);
        if (!ack.ok())
          return answer(http::ErrorResponse(ack.status()));
        Result<std::string> text =
            DecodeIngestBody(req.Header("Content-Type").value_or(""), req.body);
        if (!text.ok())
          return answer(RefusalResponse(text.status()));  // 413 for a body past the cap
        // A small zstd body can decode to 64 MiB and parse to much more; the listener only sees
        // the small body, so it is told to give the memory back after the answer.
        if (text->size() >= kTrimHeapAfterDecodedBytes)
          responder.TrimHeapAfterAnswer();
        Result<IngestBatch> batch = ParseIngestBatch(*text, sender->compute_id);
        if (!batch.ok())
          return answer(http::ErrorResponse(batch.status()));
        text = std::string();  // the batch holds what is kept of it
        // A credential taken from memory is checked by the samples' claim; records are written
        // before it and a batch without samples has no claim, so those read the credential now.
        const bool has_records = !batch->jobs.empty() || !batch->job_events.empty() ||
                                 !batch->gpu_allocations.empty() || !batch->stacks.empty() ||
                                 !batch->capture_windows.empty();
        if (!sender->unchecked_hash.empty() && (has_records || batch->samples == 0)) {
          Result<ControlPlane::ComputeIdentity> id =
              ctx->control.AuthenticateCredential(BearerToken(req));
          if (!id.ok())
            return answer(http::ErrorResponse(id.status()));
          sender->unchecked_hash.clear();
        }
        // Refused before the job records below are written, so nothing of the batch is stored.
        if (Status s = ctx->tsdb->CheckSeriesLimit(batch->series); !s.ok())
          return answer(TsdbErrorResponse(s));
        if (Status s = WriteRecords(*ctx, *batch); !s.ok())
          return answer(http::ErrorResponse(s));
        // What the store's answer needs, kept until it comes (AppendLater's contract).
        struct Appending {
          IngestBatch batch;
          IngestSender sender;
          std::string batch_id;
          std::string bearer;  // for a revoked credential's answer; only when unchecked
        };
        auto appending = std::make_shared<Appending>();
        appending->batch_id = batch->BatchId(sender->compute_id);
        appending->batch = *std::move(batch);
        appending->sender = *std::move(sender);
        if (!appending->sender.unchecked_hash.empty())
          appending->bearer = std::string(BearerToken(req));
        const Appending& a = *appending;
        ctx->tsdb->AppendLater(
            a.batch_id, a.batch.series, *ack, a.sender.unchecked_hash,
            [ctx, appending = std::move(appending),
             answer](Result<tsdb::TelemetryStore::AppendResult> appended) mutable {
              http::Response response =
                  AnswerAppended(*ctx, appending->batch, appending->batch_id,
                                 appending->sender.unchecked_hash, appending->bearer, appended);
              appending.reset();  // the parsed batch goes before the answer and its heap trim
              answer(std::move(response));
            });
      },
      {.max_body_bytes = kIngestBodyBytes});

  // For senders that take answers on receipt: returns once everything the store received
  // before this request is durable, with the mark that says so.
  listener.Post("/dp/v1/sync", [ctx](const http::Request& req) {
    http::Response refused;
    if (!AuthenticateCompute(*ctx, req, &refused))
      return refused;
    Result<tsdb::TelemetryStore::Durability> synced = ctx->tsdb->SyncAll();
    if (!synced.ok())
      return http::ErrorResponse(synced.status());
    wire::IngestAnswer answer;
    answer.store_epoch = synced->epoch;
    answer.durable_mark = synced->durable_mark;
    return Json(200, wire::EncodeSyncAnswer(answer));
  });
}

}  // namespace expanse::server
