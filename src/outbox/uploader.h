// Uploader: drains the outbox into the data plane, `POST /dp/v1/ingest`
// (docs/formats/ingest-batch.md), oldest first. When several entries are queued, up to
// max_batches_per_request go in one request (an envelope, wire/ingest_envelope.h): the server
// answers each entry as if it had come alone, and the answers are taken in queue order with
// the rules below, as if they had come one by one; after an answer that ends the run or sends
// entries again, the later answers are not used (those entries go again; the server answers a
// stored one as a repeat). A server that refuses envelopes (an older one answers 400 or 415 to
// the content type; 404, 405, 501; an answer that is not one per entry) gets one entry per
// request from then on; a 413 halves the envelope's bytes instead.
//
// With ack_on_receipt (the default) it asks for answers on receipt (`Expanse-Ack:
// received`): the server answers before its fdatasync, and the uploader moves on to the
// next entry while keeping the answered ones in the outbox. An entry is acknowledged in the
// outbox only once an answer's durable_mark covers its mark in the same store_epoch, in
// queue order; `POST /dp/v1/sync` settles the rest when the queue runs dry or
// max_unconfirmed are waiting. An answer from another store_epoch (the server restarted
// and may have lost them) sends every unconfirmed entry again. A server that ignores the
// header answers durably, and its answers acknowledge at once as before.
//
// What each answer does to the entry at the head of the queue:
// - 2xx: acknowledged once durable (above; a `"duplicate": true` answer too: the server
//   already has it). A 2xx that names no batch_id (an empty or non-JSON body: a proxy's page)
//   is not the store's answer: kept and retried with backoff.
// - 429, 408, 5xx, a network or TLS failure, a timeout: kept; the next try waits with
//   exponential backoff and full jitter (backoff.h), or Retry-After when the server sent one
//   (at most backoff_cap_ms).
// - 400, 413, 415, 422: the server refuses this batch for good (invalid_batch, body_too_large,
//   ...). It goes to the outbox's dead-letter file and the queue moves on, once every entry
//   before it is durable. A 400 invalid_header refuses the request, not the batch: retried.
// - /dp/v1/sync answering 404, 405 or 501 (a server without it): every unconfirmed entry is
//   sent again, and answers on receipt are no longer asked for.
// - 401 (credential_revoked, credential_invalid): kept; uploading stops until Resume(), and
//   RunOnce reports kUnauthenticated with the server's code as reason. The daemon stops itself
//   when its credential was replaced; sending further would only be refused.
// - Any other status (403, 404, 409, a redirect): kept and retried with backoff. These point
//   at the URL or the server, not at the batch, and dead-lettering on them would empty the
//   queue on a configuration mistake.
//
// The credential is read from the supplier for every request and never logged, nor put in a
// status or in the stats. Not thread-safe except stats(): one thread runs it.
#ifndef EXPANSE_OUTBOX_UPLOADER_H_
#define EXPANSE_OUTBOX_UPLOADER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "net/http_client.h"
#include "outbox/backoff.h"
#include "outbox/outbox.h"
#include "wire/records.h"

namespace expanse::outbox {

inline constexpr char kIngestPath[] = "/dp/v1/ingest";
inline constexpr char kSyncPath[] = "/dp/v1/sync";

struct UploaderOptions {
  // The data plane's base URL, as the install-token exchange returned it
  // ("https://dp.example.com"); kIngestPath is appended.
  std::string data_plane_url{};
  int64_t backoff_base_ms = 1000;
  int64_t backoff_cap_ms = int64_t{5} * 60 * 1000;
  int64_t idle_poll_ms = 5000;  // Run(): the wait when the queue is empty
  // RunOnce returns after this many entries even if more are queued, so that Run's wait
  // callback (where the daemon notices it should stop) runs during a long backfill. 0: no limit.
  uint64_t max_entries_per_run = 100;
  // Answers on receipt (above); false: one durable answer per entry.
  bool ack_on_receipt = true;
  // Entries answered on receipt that may wait for their sync before the uploader asks for one.
  size_t max_unconfirmed = 64;
  // Queued entries sent together in one request (an envelope, wire/ingest_envelope.h), at
  // most (up to 64), and the envelope's bytes (a single entry over it still goes alone; a 413
  // halves it). 1: one per request. A server that refuses envelopes gets one per request from
  // then on.
  size_t max_batches_per_request = 32;
  size_t max_envelope_bytes = size_t{8} << 20;
  // Operator-facing lines: the first failure of a streak, recovery, dead-lettered batches, a
  // refused credential. Default: stderr.
  std::function<void(std::string_view)> log = nullptr;
};

// The compute credential, "exp_cc_…", read for every request so that a replaced file takes
// effect without a restart.
using CredentialSupplier = std::function<std::string()>;

struct UploaderStats {
  uint64_t sent = 0;        // requests made
  uint64_t envelopes = 0;   // ... of which carried several entries
  uint64_t acked = 0;       // entries the server acknowledged (durably)
  uint64_t duplicates = 0;  // ... of which it already had
  uint64_t retries = 0;     // failed tries that will be repeated
  uint64_t dead_lettered = 0;
  uint64_t unconfirmed = 0;  // answered on receipt, not yet reported durable
  uint64_t resent = 0;       // sent again because the server restarted before their sync
  uint64_t dropped = 0;      // entries the outbox dropped to stay within its bound
  uint64_t consecutive_failures = 0;
  int64_t next_attempt_ms = 0;  // while backing off: when the next try may run
  std::string last_error{};     // the latest failure, e.g. "HTTP 503 unavailable"
  bool stopped = false;         // the credential was refused
};

struct RunSummary {
  uint64_t acked = 0;  // entries acknowledged or dead-lettered by this run
  // The queue was empty when the run ended. False without retry_at_ms: the run stopped at
  // max_entries_per_run with more to send.
  bool drained = false;
  int64_t retry_at_ms = 0;  // non-zero while backing off: nothing is sent before then
};

class Uploader {
 public:
  // kInvalidArgument for a data-plane URL the HTTP client would refuse (url_policy.h).
  static Result<std::unique_ptr<Uploader>> Create(UploaderOptions options, Outbox& outbox,
                                                  net::HttpClient& client,
                                                  CredentialSupplier credential, Clock& clock,
                                                  RandomSource random = nullptr);

  // Sends entries until the queue is empty, a try fails, or max_entries_per_run were done.
  // Returns at once while backing off.
  // Not OK: kUnauthenticated once the credential was refused (until Resume()), or the
  // outbox's own error when it cannot be read or acknowledged.
  Result<RunSummary> RunOnce();
  // RunOnce in a loop; between runs calls wait(ms) (ms = 0: run again at once), which returns
  // false to end the loop. Returns OK when wait ends it, or the status that stopped uploads.
  Status Run(const std::function<bool(int64_t wait_ms)>& wait);
  // Lets uploads start again after a refused credential (e.g. once a new one is in place).
  void Resume();

  UploaderStats stats();

 private:
  Uploader(UploaderOptions options, Outbox& outbox, net::HttpClient& client,
           CredentialSupplier credential, Clock& clock, RandomSource random);
  // An entry answered 2xx, or the store's durability as of a sync.
  struct Sent {
    uint64_t sequence = 0;
    std::string epoch{};
    uint64_t mark = 0;
    bool durable = false;
  };
  // What one entry's answer means for the run: its end (a retry, a stop, a failed
  // acknowledgement), or to go on with the next answer, or to stop reading this request's
  // answers and peek again (entries were dropped to be sent again, or left for the next
  // request).
  struct AnswerStep {
    std::optional<Result<RunSummary>> done{};
    bool peek_again = false;
  };
  // What a request of several entries came to: an answer per entry, or the run's end, or
  // neither (the server takes no envelopes; the entries go one at a time).
  struct EnvelopeOutcome {
    std::vector<net::HttpResponse> answers{};
    std::optional<Result<RunSummary>> done{};
  };
  // The next entries after those sent, at most `room` and (beyond the first) within
  // max_envelope_bytes.
  Result<std::vector<OutboxEntry>> PeekNext(size_t room);
  net::HttpRequest IngestRequest(std::string content_type) const;
  EnvelopeOutcome SendEnvelope(const std::vector<OutboxEntry>& entries, RunSummary& summary);
  // Logs why and sends one entry per request from now on.
  void StopEnvelopes(const std::string& why);
  // Applies the data plane's answer to one entry, in queue order (the header's rules).
  AnswerStep HandleAnswer(OutboxEntry& entry, const net::HttpResponse& response,
                          RunSummary& summary, uint64_t& handled);
  // Adds the credential and sends; kUnauthenticated when there is no credential.
  Result<net::HttpResponse> Send(net::HttpRequest& request);
  // The run's result after a request could not be made or got no answer.
  Result<RunSummary> Failed(const Status& status, RunSummary summary);
  // The run's result for a non-2xx answer (a stop or a retry); nullopt for a refusal for good
  // (400, 413, 415, 422), which dead-letters an ingest.
  std::optional<Result<RunSummary>> Refused(const net::HttpResponse& response, RunSummary& summary);
  // Applies an answer's store_epoch and durable_mark (after_sync: a sync's answer, which
  // covers every entry of its epoch) to sent_ and acknowledges its durable front in the
  // outbox. True when entries were dropped from sent_ to be sent again.
  Result<bool> Settle(const wire::IngestAnswer& answer, bool after_sync, RunSummary& summary);
  // POST /dp/v1/sync, then Settle; a failure comes back as the run's result.
  std::optional<Result<RunSummary>> SyncSent(RunSummary& summary);
  void NoteSuccess();
  // Records a failed try and when the next may run; `summary` is what the run did before.
  RunSummary Retry(RunSummary summary, std::string error, std::optional<int64_t> retry_after_ms);
  Status Stop(Status status);
  void Log(const std::string& line) const;

  const UploaderOptions options_;
  bool ack_on_receipt_;  // off for good once the server showed it has no /dp/v1/sync
  bool envelopes_;       // off for good once the server refused a request of several entries
  const size_t batches_per_request_;  // max_batches_per_request, within what a request may hold
  size_t envelope_bytes_;             // max_envelope_bytes, halved at each 413 to an envelope
  const std::string ingest_url_;
  const std::string sync_url_;
  Outbox& outbox_;
  net::HttpClient& client_;
  CredentialSupplier credential_;
  Clock& clock_;
  Backoff backoff_;
  std::mutex mu_;  // guards stats_ and stop_status_ (stats() runs on other threads)
  UploaderStats stats_;
  Status stop_status_;
  std::deque<Sent> sent_;            // answered, not yet acknowledged in the outbox; queue order
  bool rewound_since_sync_ = false;  // the last SyncSent dropped entries to send again
};

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_UPLOADER_H_
