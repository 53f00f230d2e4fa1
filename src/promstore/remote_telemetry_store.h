// RemoteTelemetryStore: the telemetry in a Prometheus-compatible cluster store
// (--telemetry-store remote): VictoriaMetrics single-node or cluster, Mimir, Thanos receive.
// Every replica of expanse-server writes there and reads from there, so they all see the same
// samples (docs/scaling.md).
//
// - Append sends the batch's samples with the remote-write protocol (remote_write.h) and
//   answers only once the store accepted them (2xx): the batch is then durable as far as
//   Expanse can know, and its sender may drop it. Exactly once across replicas: the batch's
//   id is claimed in the shared relational store first (JobStore::ClaimIngestBatch), so a
//   repeat is answered as a duplicate without being sent, and a batch another replica is
//   writing right now is answered kUnavailable (the sender retries shortly). A claim whose
//   holder died is taken over after the lease; the store must then keep one sample per
//   series and timestamp (VictoriaMetrics: -dedup.minScrapeInterval=1ms), which also makes
//   the rare double write of that case harmless.
//   Batches that arrive together are written together (group commit, as leveldb's writers):
//   the first caller to find a free slot (write_groups) takes every waiting batch, up to a
//   bound, and claims them in one statement, sends them in one remote write and marks them in
//   one statement, frees its slot, answers each (AppendLater's `done`) and takes the next
//   group if batches wait; the others' threads go on at once (AppendLater) or wait for their
//   answer (Append, for tests and tools: a thread that led keeps leading while batches wait,
//   its own answer given). A busy replica so pays for its round trips per group, not per
//   batch, and wakes no thread per batch. Only when one request brings more batches than a
//   group holds (a controller's envelope of 32) and a slot is free is a helper thread woken
//   to lead its next group beside the first. At most max_waiting_samples wait at once (the
//   memory of parsed batches whose requests hold no worker); past it a batch is answered
//   kUnavailable (reason store_busy), to be sent again shortly. When batches are already waiting
//   for the next group, a written group is answered at once and its marks ride in that group's
//   claim statement (JobStore::MarkAndClaimIngestBatches): one round trip and commit per group
//   instead of two. The answer stays honest, since the remote store has the samples. Until the mark
//   lands, a retry of such a batch is answered as a repeat when it comes in the group that
//   carries the mark, and as in flight elsewhere; once the claim's lease has lapsed (this
//   replica died, or its claims kept failing), a retry writes the same samples again, which
//   the store keeps once.
//   A failure of the group's write, or of its own mark, fails each of its batches (their
//   senders retry); a refused claim fails only its own; a claim statement that fails with the
//   marks it carries is made again without them (kept for the next), so marks never fail a
//   batch.
// - Query and QueryMany compute downsample.h's buckets in the store with PromQL
//   (promql.h): min/max/avg/last/count_over_time over windows that are exactly the buckets,
//   so the answers are the embedded store's for the same samples.
// - The series limit is the remote store's own (VictoriaMetrics: -storage.maxHourlySeries);
//   retention too. Flush writes marks still waiting for a group; ApplyRetention forgets old
//   batch records.
#ifndef EXPANSE_PROMSTORE_REMOTE_TELEMETRY_STORE_H_
#define EXPANSE_PROMSTORE_REMOTE_TELEMETRY_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "net/http_client.h"
#include "store/job_store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::promstore {

struct RemoteTelemetryOptions {
  // Where remote-write requests go, e.g. http://127.0.0.1:8428/api/v1/write (VictoriaMetrics
  // single-node), https://vminsert:8480/insert/0/prometheus/api/v1/write (cluster).
  std::string write_url{};
  // The Prometheus query API's root, to which /api/v1/query_range and /api/v1/query are
  // appended: http://127.0.0.1:8428, https://vmselect:8481/select/0/prometheus.
  std::string query_url{};
  // Sent as "Authorization: Bearer <token>" to both when not empty.
  std::string bearer_token{};
  // PEM bundle the store's certificate is checked against; "" = the system's.
  std::string ca_file{};
  // Requests in flight at once (one HTTP connection each).
  int connections = 4;
  // Groups of batches being written at once (group commit, see Append); at most connections.
  int write_groups = 2;
  // Samples of the batches waiting for a group, at most (parsed batches in memory whose
  // requests hold no worker): what the listener's workers held when each waited for its
  // answer, 8 workers x a batch's 2,000,000 samples. Past it a batch is refused kUnavailable
  // (reason store_busy) unless none waits.
  size_t max_waiting_samples = 16'000'000;
  // How long a replica's claim on a batch holds before another replica may take it over.
  int64_t claim_lease_ms = 60'000;
  // Batch records are kept this long: far past any sender's retries.
  int64_t batch_record_retention_ms = 7LL * 24 * 3'600'000;
  // Buckets asked for in one range query (VictoriaMetrics refuses more than
  // -search.maxPointsPerTimeseries, 30,000 by default).
  int max_points_per_request = 10'000;
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

class RemoteTelemetryStore final : public tsdb::TelemetryStore {
 public:
  // kInvalidArgument for a missing or refused URL (plain http only to loopback, as every
  // client of Expanse) or unusable limits. Nothing is sent until the first call.
  static Result<std::unique_ptr<RemoteTelemetryStore>> Open(RemoteTelemetryOptions options,
                                                            store::JobStore& batches, Clock& clock);

  // Writes the marks no group took (Flush: the batches whose mark was left for a group that
  // did not come, or whose claim failed).
  ~RemoteTelemetryStore() override;

  Result<AppendResult> Append(std::string_view batch_id, const tsdb::Batch& batch,
                              Ack ack = Ack::kDurable) override;
  bool ChecksCredentials() const override { return true; }
  Result<AppendResult> AppendForCredential(std::string_view batch_id, const tsdb::Batch& batch,
                                           std::string_view credential_hash) override;
  void AppendLater(std::string_view batch_id, const tsdb::Batch& batch, Ack ack,
                   std::string_view credential_hash, AppendDone done) override;
  void AppendAllLater(std::vector<PendingAppend> appends, Ack ack) override;
  Status CheckSeriesLimit(const tsdb::Batch& batch) override;
  Result<Durability> SyncAll() override;
  Durability durability() override;
  const std::string& epoch() const override { return epoch_; }
  Result<std::vector<tsdb::Bucket>> Query(const tsdb::SeriesKey& key, int64_t from_ms,
                                          int64_t to_ms, int points) override;
  Result<std::vector<std::vector<tsdb::Bucket>>> QueryMany(
      const std::vector<tsdb::SeriesQuery>& queries) override;
  Status Flush() override;
  Status ApplyRetention() override;

  // What the replica's /metrics shows of its writes (docs/scaling.md).
  struct Stats {
    uint64_t groups = 0;          // groups whose batches were sent in one remote write
    uint64_t group_batches = 0;   // batches those groups sent
    uint64_t failed_writes = 0;   // remote writes that failed (their batches were answered so)
    double write_seconds = 0;     // time spent in the remote writes, all together
    size_t waiting_batches = 0;   // batches waiting now for a group to take them
    size_t unmarked_batches = 0;  // written and answered, their mark still to be written
  };
  Stats stats();

  // Sends a PromQL query to query_url + path with the form fields given (name, value) and
  // parses the answer (promql.h). For the tests and the dashboard check.
  Result<std::string> Get(const std::string& path,
                          const std::vector<std::pair<std::string, std::string>>& form);

 private:
  RemoteTelemetryStore(RemoteTelemetryOptions options, store::JobStore& batches, Clock& clock);

  // A batch waiting for its group's write, and how to answer it.
  struct Writer;
  // The writer for `append`, or null when it was answered at once (no samples, a bad id).
  static std::unique_ptr<Writer> NewWriter(PendingAppend& append);
  // AppendLater, waiting for the answer ("" credential_hash: none to check).
  Result<AppendResult> AppendAndWait(std::string_view batch_id, const tsdb::Batch& batch,
                                     std::string_view credential_hash);
  // Hands the writer its result (its `done`).
  static void Answer(Writer& writer);
  // Claims, writes and marks the batches of one group together and sets each one's result:
  // one statement for the claims (carrying `marks`, earlier groups' written batches), one
  // remote write, and one statement for the marks unless the next group carries them. False
  // when `marks` were not written (the claim failed with them), so that the caller keeps them.
  bool WriteGroup(const std::vector<Writer*>& group, const std::vector<std::string>& marks);
  // Leads groups while batches wait and a slot is free (see AppendAllLater); `lock` holds
  // write_mu_ on entry and on return. `own_last`: the last batch of the caller's request
  // when it has just joined the waiting ones (a helper is woken if it is left behind).
  void LeadGroups(std::unique_lock<std::mutex>& lock, const Writer* own_last);
  // A helper's life: it leads groups when woken (LeadGroups), until the store closes.
  void HelperLoop();

  // One of the pooled clients, returned to the pool when the lease ends.
  class Lease;
  Lease Borrow();
  Result<net::HttpResponse> Send(net::HttpRequest request);
  // Buckets of every query of one group: same compute, range and points.
  Status QueryGroup(const std::vector<tsdb::SeriesQuery>& queries,
                    const std::vector<size_t>& members,
                    std::vector<std::vector<tsdb::Bucket>>& answers);

  const RemoteTelemetryOptions options_;
  store::JobStore& batches_;
  Clock& clock_;
  const std::string epoch_ = "remote";
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<net::HttpClient>> idle_;
  std::mutex write_mu_;
  std::deque<std::unique_ptr<Writer>> waiting_;  // not yet in a group, in arrival order
  size_t waiting_samples_ = 0;                   // theirs, all together
  int groups_in_flight_ = 0;
  // Written and answered batches whose mark waits for the next group's claim (see Append).
  std::set<std::string> unmarked_;
  Stats counted_;  // groups, group_batches, failed_writes, write_seconds; under write_mu_
  // write_groups - 1 threads that take a request's next group while its own thread writes
  // the first: a controller's envelope of 32 batches is two groups, which one thread would
  // write one after the other. Under write_mu_: idle_helpers_, closing_.
  std::condition_variable helper_cv_;
  int idle_helpers_ = 0;
  bool closing_ = false;
  std::vector<std::thread> helpers_;
};

// application/x-www-form-urlencoded text of the fields (RFC 3986 unreserved kept as is).
std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace expanse::promstore

#endif  // EXPANSE_PROMSTORE_REMOTE_TELEMETRY_STORE_H_
