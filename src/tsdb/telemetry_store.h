// TelemetryStore: what expanse-server asks of wherever the samples live. Two implementations:
// the embedded store on the server's disk (tsdb.h, the default) and a Prometheus-compatible
// cluster store spoken to over remote-write and PromQL (promstore/remote_telemetry_store.h,
// --telemetry-store remote), for replicas that must share one telemetry store.
//
// Both keep the same promises: an appended batch is stored once however often it is sent
// (batch ids), an acknowledged-durable batch survives the store's crash, and a query answers
// in the buckets of downsample.h whichever store holds the samples.
#ifndef EXPANSE_TSDB_TELEMETRY_STORE_H_
#define EXPANSE_TSDB_TELEMETRY_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tsdb/downsample.h"
#include "tsdb/sample.h"

namespace expanse::tsdb {

// One question of QueryMany: Query's arguments.
struct SeriesQuery {
  SeriesKey key;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int points = 1;
};

class TelemetryStore {
 public:
  // When Append returns. kDurable: once the batch is durable. kReceived: once the store has
  // it; durability follows shortly, and the sender keeps the batch until durable_mark reaches
  // its mark (docs/formats/ingest-batch.md). A crash loses at most what was not yet durable,
  // which its senders still hold and send again (batch ids make that harmless).
  enum class Ack { kDurable, kReceived };
  struct AppendResult {
    bool duplicate = false;
    size_t samples = 0;  // accepted (not dropped) samples
    // The batch's place among the records since the store opened, 0 for a batch stored
    // earlier (and always 0 for a store that acknowledges only durable batches).
    uint64_t mark = 0;
    bool durable = false;       // mark <= durable_mark
    uint64_t durable_mark = 0;  // every record up to here is durable
  };
  // Marks count records since the store opened and restart at every open, which draws a new
  // epoch: a mark only means something with its epoch.
  struct Durability {
    std::string epoch;
    uint64_t durable_mark = 0;
  };

  virtual ~TelemetryStore() = default;

  // Idempotent by batch_id: a batch id seen before returns OK with duplicate=true and stores
  // nothing. kResourceExhausted with reason "series_limit" for a batch over the store's
  // series limit (nothing of it stored); kUnavailable when the store cannot take it now.
  virtual Result<AppendResult> Append(std::string_view batch_id, const Batch& batch,
                                      Ack ack = Ack::kDurable) = 0;
  // Whether AppendForCredential works: a store that claims each batch in the shared relational
  // store (the remote one) checks there, in the claim's own statement, that the sender's
  // credential is live. The ingest handler then authenticates a credential its replica already
  // knows without a read of its own (one round trip fewer per batch), and a revoked credential
  // still stores nothing.
  virtual bool ChecksCredentials() const { return false; }
  // Append, for a batch whose sender's credential has not been checked yet: kUnauthenticated,
  // reason "credential_revoked", and nothing stored, when the credential with this stored hash
  // is revoked, unknown or another compute's. Only where ChecksCredentials(); elsewhere
  // kFailedPrecondition (the caller must authenticate first).
  virtual Result<AppendResult> AppendForCredential(std::string_view /*batch_id*/,
                                                   const Batch& /*batch*/,
                                                   std::string_view /*credential_hash*/) {
    return FailedPreconditionError("this telemetry store does not check credentials");
  }
  // Append's answer, handed over once there is one.
  using AppendDone = std::function<void(Result<AppendResult>)>;
  // Append (credential_hash empty) or AppendForCredential, answered through `done` rather than
  // by returning: possibly at once on this thread, possibly later on another (the remote
  // store's group commit, where the thread that writes a group answers every batch in it, so
  // that no caller's thread sits waiting). `batch_id`, `batch` and `credential_hash` must stay
  // valid until `done` has run: keep their owner in `done`, and let it go there before
  // answering further if it is large. `done` must not call back into the store.
  virtual void AppendLater(std::string_view batch_id, const Batch& batch, Ack ack,
                           std::string_view credential_hash, AppendDone done) {
    done(credential_hash.empty() ? Append(batch_id, batch, ack)
                                 : AppendForCredential(batch_id, batch, credential_hash));
  }
  // One batch of AppendAllLater: what AppendLater takes, with the same lifetime rules.
  struct PendingAppend {
    std::string_view batch_id;
    const Batch* batch = nullptr;
    std::string_view credential_hash;
    AppendDone done;
  };
  // AppendLater for each of `appends` (the batches of one request), handed to the store
  // together: the remote store then writes them in one group rather than one group each.
  virtual void AppendAllLater(std::vector<PendingAppend> appends, Ack ack) {
    for (PendingAppend& a : appends)
      AppendLater(a.batch_id, *a.batch, ack, a.credential_hash, std::move(a.done));
  }
  // What Append would say about the series limit now: lets a caller refuse a batch before it
  // stores anything else of it.
  virtual Status CheckSeriesLimit(const Batch& batch) = 0;
  // Waits until every batch appended before the call is durable.
  virtual Result<Durability> SyncAll() = 0;
  virtual Durability durability() = 0;
  virtual const std::string& epoch() const = 0;
  // Downsampled read of [from_ms, to_ms) into at most `points` buckets (downsample.h).
  virtual Result<std::vector<Bucket>> Query(const SeriesKey& key, int64_t from_ms, int64_t to_ms,
                                            int points) = 0;
  // Query for each of `queries`: answer i is what Query(queries[i]) returns, bucket for
  // bucket, in fewer reads than one per query. The first invalid query fails the call.
  virtual Result<std::vector<std::vector<Bucket>>> QueryMany(
      const std::vector<SeriesQuery>& queries) = 0;
  // Periodic upkeep, called by the server about once a minute: persisting what is held in
  // memory, and dropping what retention no longer keeps.
  virtual Status Flush() = 0;
  virtual Status ApplyRetention() = 0;
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_TELEMETRY_STORE_H_
