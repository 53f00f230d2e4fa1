// Tsdb: expanse-server's telemetry store. A telemetry store, not one row per number:
// each series keeps an open chunk of recent samples, backed by a write-ahead log, and
// seals it into a compressed chunk (chunk_codec.h) when it spans chunk_span_ms or holds
// max_chunk_samples. Flush writes sealed chunks and every open chunk (encoded, unsealed)
// to SQLite in one transaction and then empties the WAL, so frequent flushes do not cut
// chunks short. Layouts: docs/formats/tsdb-chunk.md, docs/formats/tsdb-wal.md.
//
// Ordering rule: a sample at or before the series' last sealed sample is dropped and
// counted (Stats::dropped_samples); anything later is accepted, kept sorted in the head,
// and a sample at an already-held timestamp replaces the earlier value.
//
// Thread-safe. One mutex guards the in-memory state and WAL writes, but not the
// fdatasync: appends that arrive while one sync runs wait for the next, which covers them
// all (group commit), so concurrent uploads share syncs and queries do not wait on disks.
#ifndef EXPANSE_TSDB_TSDB_H_
#define EXPANSE_TSDB_TSDB_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "tsdb/chunk_store.h"
#include "tsdb/downsample.h"
#include "tsdb/sample.h"
#include "tsdb/telemetry_store.h"
#include "tsdb/wal.h"
#include "tsdb/wal_record.h"

namespace expanse::tsdb {

inline constexpr int64_t kHourMs = 3'600'000;
inline constexpr size_t kMaxBatchIdBytes = 256;
inline constexpr int64_t kAutoFlushRetryMs = 10'000;

struct TsdbOptions {
  std::string directory;  // created if missing; holds wal.log and chunks.sqlite
  int64_t chunk_span_ms = 2 * kHourMs;
  size_t max_chunk_samples = 7200;
  int64_t retention_ms = 0;  // 0: keep everything
  // Batch ids are remembered for at least max(retention_ms, this), so a retried upload is
  // recognised even when data is kept forever.
  int64_t batch_id_retention_ms = 7 * 24 * kHourMs;
  // Append flushes by itself once the WAL grows past this. After such a flush fails, Append
  // tries again no sooner than kAutoFlushRetryMs later (by the store's clock), not at every
  // append: a flush that fails costs about as much as one that succeeds.
  uint64_t wal_flush_bytes = 64u << 20;
  int zstd_level = 3;
  // Distinct series one compute may have in memory. A batch that would take a compute past
  // it is refused whole (kResourceExhausted, reason "series_limit") and nothing of it is
  // stored. 2,000,000: a 10,000-node cluster of 8-GPU nodes has 1.2 M per-GPU series
  // (15 gpu.* metrics) and ~0.1 M per-node ones, leaving room for per-job series
  // (docs/formats/tsdb-wal.md, "Memory and limits"). >= 1.
  size_t max_series_per_compute = 2'000'000;
  // Receives operator-facing lines (a torn WAL tail, ...). Default: stderr.
  std::function<void(std::string_view)> log = nullptr;
};

class Tsdb final : public TelemetryStore {
 public:
  using Bucket = tsdb::Bucket;
  // kReceived: once the batch is in the WAL and in memory; a background sync makes it
  // durable shortly after. Marks are WAL record numbers since Open.
  using Ack = TelemetryStore::Ack;
  using AppendResult = TelemetryStore::AppendResult;
  using Durability = TelemetryStore::Durability;
  struct Stats {
    uint64_t series = 0, chunks = 0, samples = 0, bytes_on_disk = 0;
    uint64_t dropped_samples = 0;  // out of order, since Open
    uint64_t refused_batches = 0;  // over max_series_per_compute, since Open
    // Open chunks dropped, with their heads rows, because they did not decode (a flipped bit
    // fails a stored one's checksum), since Open.
    uint64_t damaged_open_chunks = 0;
    // Flushes that failed (called, or started by Append past wal_flush_bytes), since Open.
    uint64_t failed_flushes = 0;
    // WAL records that failed their checksum with an intact record after them, skipped at Open.
    uint64_t damaged_wal_records = 0;
    // Sealed chunks that did not decode when a query read them (skipped, not counted twice;
    // at most 4096 noted), since Open.
    uint64_t damaged_chunks = 0;
  };

  static Result<std::unique_ptr<Tsdb>> Open(TsdbOptions options, Clock& clock);
  ~Tsdb();

  // Durable when OK with kDurable (the batch is in the fsynced WAL). Idempotent by
  // batch_id: a batch id seen before returns OK with duplicate=true and stores nothing.
  Result<AppendResult> Append(std::string_view batch_id, const Batch& batch,
                              Ack ack = Ack::kDurable) override;
  // What Append would say about max_series_per_compute now: lets a caller refuse a batch
  // before it stores anything else of it. Append checks again.
  Status CheckSeriesLimit(const Batch& batch) override;
  // Waits until every record written before the call is durable.
  Result<Durability> SyncAll() override;
  Durability durability() override;
  const std::string& epoch() const override { return epoch_; }
  // Downsampled read of [from_ms, to_ms) into at most `points` buckets (downsample.h).
  Result<std::vector<Bucket>> Query(const SeriesKey& key, int64_t from_ms, int64_t to_ms,
                                    int points) override;
  // Query for each of `queries`: answer i is what Query(queries[i]) returns, bucket for
  // bucket. For callers with many small questions (a page of the job list asks hundreds): each
  // series' chunks read once for all its queries and each chunk decoded once, under the lock
  // for that series only (Append goes on between them; each series is read at one moment).
  // The first invalid query fails the call with Query's error.
  Result<std::vector<std::vector<Bucket>>> QueryMany(
      const std::vector<SeriesQuery>& queries) override;
  // Series of one compute whose host starts with host_prefix ("" matches all), sorted.
  Result<std::vector<SeriesKey>> ListSeries(std::string_view compute_id,
                                            std::string_view host_prefix);
  // Persists sealed chunks, every open chunk (without sealing it) and the batch ids in
  // one chunk-store transaction, then empties the WAL.
  Status Flush() override;
  // Drops chunks whose newest sample is older than retention_ms, and old batch ids; then
  // forgets series left with no data at all (not written for longer than retention_ms), in
  // memory and on disk, so that they no longer cost memory or count against
  // max_series_per_compute. A series written again later starts anew. A series leaves memory
  // only once its row is deleted: after a failed delete it stays, and the next call retries.
  Status ApplyRetention() override;
  Stats GetStats();

 private:
  struct Series {
    int64_t id = 0;
    bool persisted = false;
    bool has_sealed = false;
    int64_t sealed_end_ms = 0;  // valid when has_sealed
    // The open chunk is `saved` (encoded as of the last Flush, as in the chunk store's
    // heads table) merged with `head` (samples since, which win on equal timestamps).
    // Kept encoded so an open chunk of two hours costs about a byte per sample of memory
    // rather than sixteen.
    std::string saved;
    int64_t saved_start_ms = 0, saved_end_ms = 0;
    uint32_t saved_count = 0;
    bool saved_dirty = false;          // the heads table does not match `saved` yet
    std::vector<Sample> head;          // sorted by time, unique timestamps
    std::vector<StoredChunk> pending;  // sealed, not yet in the chunk store
  };

  Tsdb(TsdbOptions options, Clock& clock, std::string epoch)
      : options_(std::move(options)), clock_(clock), epoch_(std::move(epoch)) {}
  Status Replay(std::string_view payload);
  // Open's reading of the chunk store's series and open chunks. An open chunk that does not
  // decode is dropped: logged, counted and its row deleted, so one damaged row cannot stop the
  // server. So is a series row that repeats another's key without any data of its own.
  Status LoadStored();
  // LoadStored's deletions, after it has read everything: open chunks that did not decode and
  // series rows that repeated a key. A failed deletion is logged, not fatal: the next Flush
  // deletes the open chunks, the next Open the series rows.
  void DeleteDroppedRows(const std::vector<int64_t>& damaged_heads,
                         const std::vector<int64_t>& duplicate_series);
  size_t ApplyLocked(const Batch& batch);
  size_t ApplySeriesLocked(Series& series, std::span<const Sample> samples);
  void SealLocked(Series& series);
  // Encodes the open chunk into `saved` and empties `head`.
  void SaveHeadLocked(Series& series);
  // kDataLoss when `saved` does not decode: Open checks every stored one and this process
  // encodes the rest, so only memory gone bad or a bug gets here, and one series must not take
  // the server down for it.
  static Result<std::vector<Sample>> OpenSamples(const Series& series);
  // OpenSamples for sealing and flushing, which must go on for every other series: a `saved`
  // that does not decode is dropped (logged, counted, its heads row deleted at the next Flush)
  // and the samples since are the open chunk.
  std::vector<Sample> OpenSamplesOrDropLocked(Series& series);
  // QueryMany's work for one series: adds to samplers[i], for each i in `which` (queries of
  // `series`), the samples of its chunks that overlap query i.
  Status FeedQueriesLocked(Series& series, const std::vector<SeriesQuery>& queries,
                           const std::vector<size_t>& which, std::vector<Downsampler>& samplers);
  // A sealed chunk that did not decode when read: logged and counted the first time (it stays
  // stored; retention removes it in time).
  void NoteDamagedChunkLocked(const SeriesKey& key, int64_t series_id, int64_t start_ms,
                              const Status& error);
  Status FlushLocked();
  // The background sync behind kReceived appends: syncs while received records are not
  // yet durable; started by the first such append, stopped by the destructor.
  void SyncLoop();
  // The end of an Append: waits for its sync (kDurable) or leaves it to SyncLoop
  // (kReceived), then fills in the durability fields of `result`.
  Status FinishAppendLocked(std::unique_lock<std::mutex>& lock, Ack ack, AppendResult& result);
  // Returns once the first `records` WAL records since Open are durable, syncing them
  // itself unless another caller's sync is running (it then waits for that or the next).
  Status WaitDurableLocked(std::unique_lock<std::mutex>& lock, uint64_t records);
  // The series of `key`, created (with a new id) if missing.
  Series& SeriesFor(const SeriesKeyView& key);
  // The series of `key` in both series_ and series_index_, created without an id if missing.
  Series& IndexedSeries(const SeriesKeyView& key, bool* inserted = nullptr);
  Series* FindSeries(const SeriesKeyView& key);
  // kResourceExhausted ("series_limit") when `batch` adds so many new series to a compute
  // that it would hold more than max_series_per_compute.
  Status CheckSeriesLimitLocked(const Batch& batch);
  // Removes the series from series_, series_index_ and series_per_compute_.
  void ForgetSeriesLocked(std::map<SeriesKey, Series>::iterator it);

  struct SeriesKeyHash {
    size_t operator()(const SeriesKeyView& k) const;
  };

  const TsdbOptions options_;
  Clock& clock_;
  std::mutex mu_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Wal> wal_;
  std::map<SeriesKey, Series> series_;  // sorted, for ListSeries; nodes never move
  // The same series by hash: every ingested series is looked up once per batch, and the
  // map's comparisons of four mostly-equal strings showed in the ingest profile. Its keys
  // view series_'s own.
  std::unordered_map<SeriesKeyView, Series*, SeriesKeyHash> series_index_;
  int64_t next_series_id_ = 1;
  // Invariant: the number of entries of series_ per compute id (entries with a count of 0
  // are erased).
  std::unordered_map<std::string, size_t> series_per_compute_;
  uint64_t refused_batches_ = 0;
  std::unordered_map<std::string, int64_t> persisted_batch_ids_;  // id -> received_ms
  std::unordered_map<std::string, int64_t> pending_batch_ids_;    // in the WAL only
  uint64_t dropped_samples_ = 0;
  uint64_t damaged_open_chunks_ = 0;
  // Sealed chunks (series id, start) found damaged by a read; at most kMaxDamagedChunksNoted,
  // so a store gone bad everywhere costs bounded memory (and log lines).
  static constexpr size_t kMaxDamagedChunksNoted = 4096;
  std::set<std::pair<int64_t, int64_t>> damaged_chunks_;
  uint64_t failed_flushes_ = 0;
  // Automatic flushes that failed in a row, and the clock when the last of them did: Append
  // retries no sooner than kAutoFlushRetryMs after it, and logs only the first of a streak.
  uint64_t auto_flush_failures_ = 0;
  int64_t auto_flush_failed_ms_ = 0;
  // Group commit. Invariant: wal_synced_ <= wal_written_ (records since Open; a Flush
  // makes every written record durable through the chunk store).
  std::condition_variable synced_cv_;
  uint64_t wal_written_ = 0;
  uint64_t wal_synced_ = 0;
  bool syncing_ = false;
  const std::string epoch_;
  uint64_t received_pending_ = 0;  // the last record a kReceived append left to SyncLoop
  bool stopping_ = false;
  std::condition_variable sync_loop_cv_;
  std::thread sync_loop_;
  // Appends past validation that have not yet taken the mutex to write their record. A new
  // sync leader waits (kSyncGatherWindow at most) for them, so that one sync covers every
  // batch already in the store's hands: without it 4 concurrent uploads shared a sync only
  // ~1.75 at a time, each waiting for almost two syncs.
  std::atomic<int> arriving_{0};
  std::condition_variable arrived_cv_;
  // A failed fdatasync leaves the page cache's fate unknown (the kernel may have dropped
  // the dirty pages), so appends fail until a Flush has made everything durable anew.
  Status sync_error_;
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_TSDB_H_
