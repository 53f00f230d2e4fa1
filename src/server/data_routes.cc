// The data plane over HTTP: telemetry batches from the controller daemon.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "http/error.h"
#include "server/ingest_batch.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "wire/ingest_envelope.h"
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
                                                   .jobs = batch.jobs_written,
                                                   .durable = appended->durable,
                                                   .store_epoch = ctx.tsdb->epoch(),
                                                   .mark = appended->mark,
                                                   .durable_mark = appended->durable_mark}));
}

// What the store's answer to one batch needs, kept until it comes (AppendLater's contract).
struct Appending {
  IngestBatch batch;
  IngestSender sender;
  std::string batch_id;
  std::string bearer;  // for a revoked credential's answer; only when unchecked
};

// One batch, from its body (as sent, zstd or JSON) to the samples the store must append: decoded,
// parsed, its credential read where the store will not check it, its series limit checked and
// its records written. The answer instead when it ends before the store (a refusal, a failure).
// `sender` is the request's: once a batch read the credential, the request's later batches
// need not. `decoded_bytes` grows by the document's size.
std::variant<http::Response, std::shared_ptr<Appending>> PrepareBatch(
    RouteContext& ctx, const http::Request& req, IngestSender& sender,
    std::string_view content_type, std::string_view body, size_t& decoded_bytes) {
  Result<std::string> text = DecodeIngestBody(content_type, body);
  if (!text.ok())
    return RefusalResponse(text.status());  // 413 for a body past the cap
  decoded_bytes += text->size();
  Result<IngestBatch> batch = ParseIngestBatch(*text, sender.compute_id);
  if (!batch.ok())
    return http::ErrorResponse(batch.status());
  text = std::string();  // the batch holds what is kept of it
  // A credential taken from memory is checked by the samples' claim; records are written
  // before it and a batch without samples has no claim, so those read the credential now.
  const bool has_records = !batch->jobs.empty() || !batch->job_events.empty() ||
                           !batch->gpu_allocations.empty() || !batch->stacks.empty() ||
                           !batch->capture_windows.empty();
  if (!sender.unchecked_hash.empty() && (has_records || batch->samples == 0)) {
    Result<ControlPlane::ComputeIdentity> id = ctx.control.AuthenticateCredential(BearerToken(req));
    if (!id.ok())
      return http::ErrorResponse(id.status());
    sender.unchecked_hash.clear();
  }
  // Refused before the job records below are written, so nothing of the batch is stored. Each
  // batch is checked alone: batches arriving together (in one envelope or in concurrent
  // requests) may cross the limit between them, and the one the store then refuses keeps its
  // (idempotent) records.
  if (Status s = ctx.tsdb->CheckSeriesLimit(batch->series); !s.ok())
    return TsdbErrorResponse(s);
  if (Status s = WriteRecords(ctx, *batch); !s.ok())
    return http::ErrorResponse(s);
  // Written: only the samples wait for the store. Let go of the records now, so a request's
  // batches hold no more than their samples while the last ones are read.
  batch->jobs_written = batch->jobs.size();
  batch->jobs = {};
  batch->job_events = {};
  batch->gpu_allocations = {};
  batch->stacks = {};
  batch->capture_windows = {};
  auto appending = std::make_shared<Appending>();
  appending->batch_id = batch->BatchId(sender.compute_id);
  appending->batch = *std::move(batch);
  appending->sender = sender;
  if (!appending->sender.unchecked_hash.empty())
    appending->bearer = std::string(BearerToken(req));
  return appending;
}

// Counts an answer for /metrics by its status: refusals and failures; stored batches are
// counted where the store answered them (AnswerAppended).
void CountAnswer(RouteContext& ctx, int status) {
  if (ctx.counters != nullptr && status >= 400) {
    (status >= 500 ? ctx.counters->ingest_failed : ctx.counters->ingest_refused)
        .fetch_add(1, std::memory_order_relaxed);
  }
}

wire::EnvelopeAnswer ToEnvelopeAnswer(http::Response response) {
  wire::EnvelopeAnswer answer{.status = response.status, .body = std::move(response.body)};
  for (const auto& [name, value] : response.headers) {
    if (name == "Retry-After")
      answer.retry_after = value;
  }
  return answer;
}

// The batches of one envelope request: each answered on its own, in order, and the request
// answered once the last one is (from whichever thread answered it).
class EnvelopeAnswers {
 public:
  EnvelopeAnswers(size_t batches, http::Responder responder)
      : answers_(batches), responder_(std::move(responder)) {}
  // Answers known before the store (refusals): set before any appended one can finish.
  void SetEarly(size_t index, http::Response response) {
    answers_[index] = ToEnvelopeAnswer(std::move(response));
  }
  void ExpectAppended(size_t count) { pending_ = count; }
  // The store's answer to batch `index`; the last one answers the request.
  void SetAppended(size_t index, http::Response response) {
    wire::EnvelopeAnswer answer = ToEnvelopeAnswer(std::move(response));
    std::unique_lock lock(mu_);
    answers_[index] = std::move(answer);
    if (--pending_ == 0) {
      lock.unlock();
      Finish();
    }
  }
  void Finish() {
    // Already a JSON document (written with invalid UTF-8 replaced, as Json() would): not
    // parsed and written again.
    responder_.Respond(http::JsonResponse(200, wire::EncodeEnvelopeAnswers(answers_)));
  }

 private:
  std::mutex mu_;
  std::vector<wire::EnvelopeAnswer> answers_;
  size_t pending_ = 0;  // appended batches not answered yet; under mu_
  http::Responder responder_;
};

// A batch left for the sender's next request: not a failure, and not counted as one.
http::Response EnvelopeFull(const std::string& why) {
  return http::ErrorResponse(503, "envelope_full", why + "; send this batch again");
}

// POST /dp/v1/ingest with several batches (wire/ingest_envelope.h): each validated, its records
// written and its answer given as if sent alone; the samples of all go to the store together.
void IngestEnvelope(RouteContext* ctx, const http::Request& req, http::Responder responder,
                    IngestSender sender, tsdb::TelemetryStore::Ack ack) {
  Result<std::vector<wire::EnvelopeFrame>> frames = wire::ParseIngestEnvelope(req.body);
  if (!frames.ok()) {
    CountAnswer(*ctx, 400);
    responder.Respond(http::ErrorResponse(frames.status()));
    return;
  }
  auto answers = std::make_shared<EnvelopeAnswers>(frames->size(), responder);
  std::vector<tsdb::TelemetryStore::PendingAppend> appends;
  std::vector<std::pair<size_t, std::shared_ptr<Appending>>> prepared;
  size_t decoded_bytes = 0, samples = 0;
  for (size_t i = 0; i < frames->size(); ++i) {
    const wire::EnvelopeFrame& frame = (*frames)[i];
    // One batch's decoded document at most, all together (a small zstd frame can decode to
    // 64 MiB): the rest wait for the next request, undecoded. Frame 0 is always read.
    if (i > 0 && decoded_bytes >= kMaxIngestJsonBytes) {
      answers->SetEarly(i, EnvelopeFull("this request's batches decoded to " +
                                        std::to_string(decoded_bytes) + " bytes already"));
      continue;
    }
    auto batch = PrepareBatch(*ctx, req, sender, frame.content_type, frame.body, decoded_bytes);
    if (auto* refused = std::get_if<http::Response>(&batch)) {
      CountAnswer(*ctx, refused->status);
      answers->SetEarly(i, std::move(*refused));
      continue;
    }
    std::shared_ptr<Appending>& appending = std::get<std::shared_ptr<Appending>>(batch);
    // Past the request's samples (ServerOptions::max_envelope_samples), the rest wait for the
    // next request; the first batch is always taken, so every request makes progress.
    if (!prepared.empty() && samples + appending->batch.samples > ctx->max_envelope_samples) {
      // Its records are written (idempotent upserts); the next request stores the rest.
      answers->SetEarly(i, EnvelopeFull("this request's batches hold " + std::to_string(samples) +
                                        " samples already"));
      continue;
    }
    samples += appending->batch.samples;
    prepared.emplace_back(i, std::move(appending));
  }
  if (decoded_bytes >= kTrimHeapAfterDecodedBytes)
    responder.TrimHeapAfterAnswer();
  if (prepared.empty())
    return answers->Finish();
  answers->ExpectAppended(prepared.size());
  for (auto& entry : prepared) {
    const size_t index = entry.first;  // a structured binding cannot be captured (clang 14)
    std::shared_ptr<Appending> appending = std::move(entry.second);
    const Appending& a = *appending;
    appends.push_back(
        {.batch_id = a.batch_id,
         .batch = &a.batch.series,
         .credential_hash = a.sender.unchecked_hash,
         .done = [ctx, answers, index, appending = std::move(appending)](
                     Result<tsdb::TelemetryStore::AppendResult> appended) mutable {
           http::Response response =
               AnswerAppended(*ctx, appending->batch, appending->batch_id,
                              appending->sender.unchecked_hash, appending->bearer, appended);
           appending.reset();  // the parsed batch goes before the answer and its heap trim
           CountAnswer(*ctx, response.status);
           answers->SetAppended(index, std::move(response));
         }});
  }
  prepared.clear();
  ctx->tsdb->AppendAllLater(std::move(appends), ack);
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
  // A request may carry several batches (an envelope), each answered as if sent alone.
  listener.PostDeferred(
      "/dp/v1/ingest",
      [ctx](const http::Request& req, http::Responder responder) {
        auto answer = [ctx, responder](http::Response response) {
          CountAnswer(*ctx, response.status);
          responder.Respond(std::move(response));
        };
        http::Response refused;
        std::optional<IngestSender> sender = AuthenticateIngestSender(*ctx, req, &refused);
        if (!sender)
          return answer(std::move(refused));
        Result<tsdb::TelemetryStore::Ack> ack = AckMode(req);
        if (!ack.ok())
          return answer(http::ErrorResponse(ack.status()));
        const std::string_view content_type = req.Header("Content-Type").value_or("");
        if (content_type == wire::kIngestEnvelopeContentType)
          return IngestEnvelope(ctx, req, responder, *std::move(sender), *ack);
        size_t decoded_bytes = 0;
        auto batch = PrepareBatch(*ctx, req, *sender, content_type, req.body, decoded_bytes);
        // A small zstd body can decode to 64 MiB and parse to much more; the listener only sees
        // the small body, so it is told to give the memory back after the answer.
        if (decoded_bytes >= kTrimHeapAfterDecodedBytes)
          responder.TrimHeapAfterAnswer();
        if (auto* early = std::get_if<http::Response>(&batch))
          return answer(std::move(*early));
        std::shared_ptr<Appending> appending = std::get<std::shared_ptr<Appending>>(batch);
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
