#include "outbox/uploader.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/quote.h"
#include "net/url_policy.h"
#include "wire/error_answer.h"
#include "wire/ingest_envelope.h"

namespace expanse::outbox {
namespace {

// A refusal of the batch itself. `invalid_header` refuses the request's headers (an
// Expanse-Ack the server does not accept), which no batch can fix: retried instead, since
// dead-lettering on it would empty the queue.
bool IsPoison(int status, std::string_view code) {
  if (code == "invalid_header")
    return false;
  return status == 400 || status == 413 || status == 415 || status == 422;
}

bool HonoursRetryAfter(int status) { return status == 429 || status == 503; }

// "network_error: POST ... refused": the stable reason first, for a quick look in a heartbeat.
std::string Describe(const Status& status) {
  return status.reason().empty() ? status.ToString() : status.reason() + ": " + status.message();
}

std::string JoinUrl(std::string base, std::string_view path) {
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  return base + std::string(path);
}

}  // namespace

Uploader::Uploader(UploaderOptions options, Outbox& outbox, net::HttpClient& client,
                   CredentialSupplier credential, Clock& clock, RandomSource random)
    : options_(std::move(options)),
      ack_on_receipt_(options_.ack_on_receipt),
      envelopes_(options_.max_batches_per_request > 1),
      batches_per_request_(
          std::clamp<size_t>(options_.max_batches_per_request, 1, wire::kMaxEnvelopeBatches)),
      envelope_bytes_(options_.max_envelope_bytes),
      ingest_url_(JoinUrl(options_.data_plane_url, kIngestPath)),
      sync_url_(JoinUrl(options_.data_plane_url, kSyncPath)),
      outbox_(outbox),
      client_(client),
      credential_(std::move(credential)),
      clock_(clock),
      backoff_(options_.backoff_base_ms, options_.backoff_cap_ms,
               random ? std::move(random) : DefaultRandomSource()) {}

Result<std::unique_ptr<Uploader>> Uploader::Create(UploaderOptions options, Outbox& outbox,
                                                   net::HttpClient& client,
                                                   CredentialSupplier credential, Clock& clock,
                                                   RandomSource random) {
  if (options.data_plane_url.empty())
    return InvalidArgumentError("uploader: no data-plane URL");
  EXPANSE_RETURN_IF_ERROR(net::CheckUrlAllowed(JoinUrl(options.data_plane_url, kIngestPath)));
  if (!credential)
    return InvalidArgumentError("uploader: no credential supplier");
  return std::unique_ptr<Uploader>(new Uploader(std::move(options), outbox, client,
                                                std::move(credential), clock, std::move(random)));
}

void Uploader::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

Result<RunSummary> Uploader::RunOnce() {
  RunSummary summary;
  {
    std::lock_guard lock(mu_);
    if (!stop_status_.ok())
      return stop_status_;
    if (clock_.NowMs() < stats_.next_attempt_ms) {
      summary.retry_at_ms = stats_.next_attempt_ms;
      return summary;
    }
  }
  uint64_t handled = 0;  // entries answered or dead-lettered by this run
  while (options_.max_entries_per_run == 0 || handled < options_.max_entries_per_run) {
    const size_t max_sent = std::max<size_t>(options_.max_unconfirmed, 1);
    if (sent_.size() >= max_sent) {
      if (auto done = SyncSent(summary))
        return *std::move(done);
      continue;
    }
    // As many as one request may carry, within what may wait unconfirmed and this run's share.
    size_t room = envelopes_ ? batches_per_request_ : 1;
    room = std::min(room, max_sent - sent_.size());
    if (options_.max_entries_per_run != 0)
      room = std::min<uint64_t>(room, options_.max_entries_per_run - handled);
    EXPANSE_ASSIGN_OR_RETURN(std::vector<OutboxEntry> entries, PeekNext(room));
    if (entries.empty()) {
      if (sent_.empty()) {
        summary.drained = true;
        return summary;
      }
      if (auto done = SyncSent(summary))  // the rest of the queue waits only for its sync
        return *std::move(done);
      continue;
    }
    std::vector<net::HttpResponse> answers;
    if (entries.size() == 1) {
      net::HttpRequest request = IngestRequest(entries[0].content_type);
      request.body = std::move(entries[0].payload);
      Result<net::HttpResponse> response = Send(request);
      entries[0].payload = std::move(request.body);  // kept for a dead-letter
      if (!response.ok())
        return Failed(response.status(), summary);
      answers.push_back(*std::move(response));
    } else {
      EnvelopeOutcome sent = SendEnvelope(entries, summary);
      if (sent.done)
        return *std::move(sent.done);
      if (sent.answers.empty())
        continue;  // the envelope was refused as such: the same entries go again, alone or fewer
      answers = std::move(sent.answers);
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      AnswerStep step = HandleAnswer(entries[i], answers[i], summary, handled);
      if (step.done)
        return *std::move(step.done);
      if (step.peek_again)
        break;
    }
  }
  return summary;
}

Result<std::vector<OutboxEntry>> Uploader::PeekNext(size_t room) {
  std::vector<OutboxEntry> entries;
  uint64_t after = sent_.empty() ? 0 : sent_.back().sequence;
  size_t bytes = 0;
  while (entries.size() < room) {
    EXPANSE_ASSIGN_OR_RETURN(std::optional<OutboxEntry> entry, outbox_.Peek(after));
    if (!entry)
      break;
    // A frame's header line: its content type, a space, the length and a newline.
    const size_t framed = entry->payload.size() + entry->content_type.size() + 16;
    if (!entries.empty() && bytes + framed > envelope_bytes_)
      break;
    // An entry whose content type no frame can carry goes alone, as a request of its own.
    if (!wire::IsFrameContentType(entry->content_type)) {
      if (entries.empty())
        entries.push_back(*std::move(entry));
      break;
    }
    bytes += framed;
    after = entry->sequence;
    entries.push_back(*std::move(entry));
  }
  return entries;
}

net::HttpRequest Uploader::IngestRequest(std::string content_type) const {
  net::HttpRequest request{
      .method = "POST", .url = ingest_url_, .headers = {{"Content-Type", std::move(content_type)}}};
  if (ack_on_receipt_)
    request.headers.emplace_back("Expanse-Ack", "received");
  return request;
}

Uploader::EnvelopeOutcome Uploader::SendEnvelope(const std::vector<OutboxEntry>& entries,
                                                 RunSummary& summary) {
  net::HttpRequest request = IngestRequest(wire::kIngestEnvelopeContentType);
  size_t bytes = 0;
  for (const OutboxEntry& entry : entries)
    bytes += entry.payload.size() + entry.content_type.size() + 16;
  request.body.reserve(bytes);
  for (const OutboxEntry& entry : entries)
    wire::AppendEnvelopeFrame(request.body, entry.content_type, entry.payload);
  Result<net::HttpResponse> response = Send(request);
  if (response.ok() || response.status().code() != StatusCode::kUnauthenticated) {
    std::lock_guard lock(mu_);  // made (not refused for want of a credential)
    ++stats_.envelopes;
  }
  if (!response.ok())
    return {.done = Failed(response.status(), summary)};
  const int status = response->status;
  if (status >= 200 && status < 300) {
    Result<std::vector<wire::EnvelopeAnswer>> answers =
        wire::DecodeEnvelopeAnswers(response->body, entries.size());
    if (!answers.ok()) {
      // Nothing of it can be trusted; the entries go again one at a time, where each answer
      // is its own (a batch the server did store is then answered as a repeat).
      StopEnvelopes("its answer to " + std::to_string(entries.size()) +
                    " batches was unreadable (" + answers.status().message() + ")");
      return {};
    }
    // A stored batch's answer always names it: a 2xx that does not (an empty body from a proxy
    // or a faulty build) would acknowledge what may never have been stored.
    for (const wire::EnvelopeAnswer& answer : *answers) {
      if (answer.status >= 200 && answer.status < 300 &&
          wire::DecodeIngestAnswer(answer.body).batch_id.empty()) {
        StopEnvelopes("a batch's 2xx answer in it names no batch_id");
        return {};
      }
    }
    std::vector<net::HttpResponse> out;
    out.reserve(answers->size());
    for (wire::EnvelopeAnswer& answer : *answers) {
      net::HttpResponse one{.status = answer.status, .body = std::move(answer.body)};
      if (answer.retry_after)
        one.headers.emplace_back("Retry-After", *answer.retry_after);
      out.push_back(std::move(one));
    }
    return {.answers = std::move(out)};
  }
  const auto [code, message] = wire::DecodeErrorAnswer(response->body);
  // Too large for the server or a proxy in front of it (nginx's default is 1 MiB): smaller
  // requests from now on, down to one entry each. Not a failure: sent again at once.
  if (status == 413) {
    envelope_bytes_ = std::min(envelope_bytes_, request.body.size()) / 2;
    Log("uploader: the data plane refused a request of " + std::to_string(request.body.size()) +
        " bytes (HTTP 413); at most " + std::to_string(envelope_bytes_) +
        " bytes per request from now on");
    return {};
  }
  // An older server (after a rollback, say) refuses the content type (400 or 415) or the
  // route, or refuses the envelope itself (400 invalid_envelope): the same entries then go one
  // at a time, from now on.
  if ((IsPoison(status, code) && status != 422) || status == 404 || status == 405 ||
      status == 501) {
    StopEnvelopes("HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code));
    return {};
  }
  std::optional<Result<RunSummary>> refused = Refused(*response, summary);
  if (!refused)  // a 422 for the whole request: a fault on the server's side, tried again
    refused =
        Retry(summary, "HTTP " + std::to_string(status) + " to several batches", std::nullopt);
  return {.done = *std::move(refused)};
}

void Uploader::StopEnvelopes(const std::string& why) {
  Log("uploader: the data plane takes no requests of several batches (" +
      QuoteForMessage(why, 300) + "); sending one batch per request from now on");
  envelopes_ = false;
}

Uploader::AnswerStep Uploader::HandleAnswer(OutboxEntry& entry, const net::HttpResponse& response,
                                            RunSummary& summary, uint64_t& handled) {
  const int status = response.status;
  if (status >= 200 && status < 300) {
    const wire::IngestAnswer answer = wire::DecodeIngestAnswer(response.body);
    // A stored batch's answer always names it. A 2xx that does not (a proxy's HTML page, an
    // empty body) decodes to empty fields, which would read as durable and delete an entry that
    // may never have reached the store: retried with backoff instead, as SendEnvelope refuses
    // such an answer among several.
    if (answer.batch_id.empty()) {
      return {.done = Retry(summary, "HTTP " + std::to_string(status) + " names no batch_id",
                            std::nullopt)};
    }
    ++handled;
    const bool duplicate = answer.duplicate;
    Sent sent{.sequence = entry.sequence, .durable = true};
    // An answer with a store_epoch is durable only when it says so; one without (a server
    // that ignores Expanse-Ack) came after its sync, as answers always did. A missing mark
    // stays 0, which only a sync can cover.
    if (!answer.store_epoch.empty() && !answer.durable) {
      sent.durable = false;
      sent.epoch = answer.store_epoch;
      sent.mark = answer.mark;
    }
    sent_.push_back(std::move(sent));
    {
      std::lock_guard lock(mu_);
      stats_.duplicates += duplicate ? 1 : 0;
    }
    NoteSuccess();
    Result<bool> rewound = Settle(answer, /*after_sync=*/false, summary);
    if (!rewound.ok())
      return {.done = Result<RunSummary>(rewound.status())};
    // Entries were dropped to be sent again: the next ones follow the last one kept.
    return {.peek_again = *rewound};
  }
  // A request's batches past what it could hold: sent again in the next request, not a failure.
  if (status == 503 && wire::DecodeErrorAnswer(response.body).code == "envelope_full")
    return {.peek_again = true};
  if (std::optional<Result<RunSummary>> refused = Refused(response, summary))
    return {.done = *std::move(refused)};
  // Refused for good. Dead-lettering acknowledges everything before the entry too, so the
  // entries still waiting for their sync must be durable first.
  if (!sent_.empty()) {
    if (auto done = SyncSent(summary))
      return {.done = *std::move(done)};
    if (rewound_since_sync_)
      return {.peek_again = true};  // some are to be sent again first
  }
  ++handled;
  const auto [code, message] = wire::DecodeErrorAnswer(response.body);
  const std::string reason = "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code) +
                             (message.empty() ? "" : ": " + message);
  Log("uploader: the data plane refused batch " + std::to_string(entry.sequence) + " for good (" +
      QuoteForMessage(reason, 300) + "); moved to the dead-letter file");
  Status dead = outbox_.DeadLetter(entry, reason);
  std::lock_guard lock(mu_);
  ++stats_.dead_lettered;
  ++summary.acked;
  if (!dead.ok())
    return {.done = Result<RunSummary>(dead)};
  return {};
}

Result<net::HttpResponse> Uploader::Send(net::HttpRequest& request) {
  const std::string credential = credential_();
  if (credential.empty()) {
    return UnauthenticatedError("uploader: no compute credential is available")
        .WithReason("credential_missing");
  }
  request.headers.emplace_back("Authorization", "Bearer " + credential);
  {
    std::lock_guard lock(mu_);
    ++stats_.sent;
  }
  return client_.Send(request);
}

Result<RunSummary> Uploader::Failed(const Status& status, RunSummary summary) {
  // No credential, or a request the client refuses to make (a bad header from a malformed
  // credential): refused every time.
  if (status.code() == StatusCode::kUnauthenticated ||
      status.code() == StatusCode::kInvalidArgument)
    return Stop(status);
  return Retry(summary, Describe(status), std::nullopt);
}

std::optional<Result<RunSummary>> Uploader::Refused(const net::HttpResponse& response,
                                                    RunSummary& summary) {
  const int status = response.status;
  const auto [code, message] = wire::DecodeErrorAnswer(response.body);  // code: snake_case or ""
  if (status == 401) {
    return Stop(UnauthenticatedError("uploader: the data plane refused the credential (" +
                                     (code.empty() ? std::string("401") : code) +
                                     "); uploads stopped, nothing was dropped")
                    .WithReason(code.empty() ? "credential_invalid" : code));
  }
  if (IsPoison(status, code))
    return std::nullopt;
  std::optional<int64_t> retry_after;
  if (HonoursRetryAfter(status)) {
    if (auto value = response.Header("Retry-After"))
      retry_after = ParseRetryAfterMs(*value);
  }
  return Retry(summary, "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code),
               retry_after);
}

std::optional<Result<RunSummary>> Uploader::SyncSent(RunSummary& summary) {
  net::HttpRequest request{.method = "POST", .url = sync_url_};
  Result<net::HttpResponse> response = Send(request);
  if (!response.ok())
    return Failed(response.status(), summary);
  const int status = response->status;
  if (status == 404 || status == 405 || status == 501) {
    // A server without /dp/v1/sync (an older build after a rollback, say) cannot report
    // durability: everything still waiting goes again, answered durably from now on.
    Log("uploader: " + std::string(kSyncPath) + " answered HTTP " + std::to_string(status) +
        "; sending the unconfirmed batches again and asking for durable answers from now on");
    ack_on_receipt_ = false;
    Result<bool> rewound = Settle(wire::IngestAnswer{}, /*after_sync=*/false, summary);
    if (!rewound.ok())
      return Result<RunSummary>(rewound.status());
    rewound_since_sync_ = true;
    return std::nullopt;
  }
  if (status < 200 || status >= 300) {
    if (std::optional<Result<RunSummary>> refused = Refused(*response, summary))
      return refused;
    return Retry(summary, "HTTP " + std::to_string(response->status) + " from " + kSyncPath,
                 std::nullopt);
  }
  const wire::IngestAnswer answer = wire::DecodeIngestAnswer(response->body);
  if (answer.store_epoch.empty())
    return Retry(summary, std::string("an answer without store_epoch from ") + kSyncPath,
                 std::nullopt);
  Result<bool> rewound = Settle(answer, /*after_sync=*/true, summary);
  if (!rewound.ok())
    return Result<RunSummary>(rewound.status());
  rewound_since_sync_ = *rewound;
  if (!*rewound && !sent_.empty()) {
    // A sync covers everything received before it; anything else is a server fault, and
    // asking again at once would only loop.
    return Retry(summary,
                 std::string(kSyncPath) +
                     " answered a durable_mark below the marks "
                     "of batches it had received",
                 std::nullopt);
  }
  NoteSuccess();
  return std::nullopt;
}

Result<bool> Uploader::Settle(const wire::IngestAnswer& answer, bool after_sync,
                              RunSummary& summary) {
  bool rewound = false;
  // "" from a server that does not answer on receipt (any more): like a new epoch.
  const std::string& epoch = answer.store_epoch;
  const uint64_t durable_mark = answer.durable_mark;
  for (size_t i = 0; i < sent_.size(); ++i) {
    Sent& sent = sent_[i];
    if (sent.durable)
      continue;
    if (sent.epoch != epoch) {
      // The server started anew since this answer on receipt and may have lost the entry:
      // it and everything after it go again (the next Peek continues after the last kept).
      std::lock_guard lock(mu_);
      stats_.resent += sent_.size() - i;
      sent_.resize(i);
      rewound = true;
      break;
    }
    // A sync covers everything its store received before it; an ingest answer covers what
    // its durable_mark reaches (never a mark of 0, which the answer did not give).
    sent.durable = after_sync || (sent.mark != 0 && sent.mark <= durable_mark);
  }
  uint64_t acked = 0, through = 0;
  while (!sent_.empty() && sent_.front().durable) {
    through = sent_.front().sequence;
    sent_.pop_front();
    ++acked;
  }
  if (acked > 0)
    EXPANSE_RETURN_IF_ERROR(outbox_.Ack(through));
  std::lock_guard lock(mu_);
  stats_.acked += acked;
  summary.acked += acked;
  stats_.unconfirmed = sent_.size();
  return rewound;
}

void Uploader::NoteSuccess() {
  std::lock_guard lock(mu_);
  if (stats_.consecutive_failures > 0) {
    Log("uploader: uploads resumed after " + std::to_string(stats_.consecutive_failures) +
        " failed tries");
  }
  stats_.consecutive_failures = 0;
  stats_.last_error.clear();
  stats_.next_attempt_ms = 0;
  backoff_.Reset();
}

RunSummary Uploader::Retry(RunSummary summary, std::string error,
                           std::optional<int64_t> retry_after_ms) {
  const int64_t jittered = backoff_.NextDelayMs();
  const int64_t delay =
      retry_after_ms ? std::min(*retry_after_ms, options_.backoff_cap_ms) : jittered;
  std::lock_guard lock(mu_);
  ++stats_.retries;
  if (stats_.consecutive_failures++ == 0) {
    // Logged once per streak: an outage of hours must not fill the log.
    Log("uploader: upload failed (" + error + "); retrying with backoff, nothing is dropped");
  }
  stats_.last_error = std::move(error);
  stats_.next_attempt_ms = clock_.NowMs() + delay;
  summary.retry_at_ms = stats_.next_attempt_ms;
  return summary;
}

Status Uploader::Stop(Status status) {
  Log(status.message());
  std::lock_guard lock(mu_);
  stats_.stopped = true;
  stats_.last_error = Describe(status);
  stop_status_ = status;
  return status;
}

void Uploader::Resume() {
  std::lock_guard lock(mu_);
  stop_status_ = OkStatus();
  stats_.stopped = false;
  stats_.next_attempt_ms = 0;
}

Status Uploader::Run(const std::function<bool(int64_t wait_ms)>& wait) {
  while (true) {
    Result<RunSummary> run = RunOnce();
    int64_t wait_ms = options_.idle_poll_ms;
    if (!run.ok()) {
      if (run.status().code() == StatusCode::kUnauthenticated)
        return run.status();
      // The outbox could not be read or acknowledged (a disk problem): try again later.
      Log("uploader: " + run.status().ToString());
    } else if (run->retry_at_ms > 0) {
      wait_ms = std::max<int64_t>(run->retry_at_ms - clock_.NowMs(), 0);
    } else if (!run->drained) {
      wait_ms = 0;  // more to send; the wait only gives the caller a chance to stop
    }
    if (!wait(wait_ms))
      return OkStatus();
  }
}

UploaderStats Uploader::stats() {
  const uint64_t dropped = outbox_.stats().dropped_entries;
  std::lock_guard lock(mu_);
  UploaderStats stats = stats_;
  stats.dropped = dropped;
  return stats;
}

}  // namespace expanse::outbox
