#include "tsdb/tsdb.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <system_error>
#include <tuple>
#include <unordered_set>

#include "core/file_util.h"
#include "tsdb/chunk_codec.h"

namespace expanse::tsdb {
namespace {

constexpr const char* kWalFile = "wal.log";
constexpr const char* kChunkFile = "chunks.sqlite";
// How long a sync leader waits for appends that are encoding their records: a few times
// what that takes (~0.1 ms), below a sync (0.3-1 ms here).
constexpr std::chrono::microseconds kSyncGatherWindow{300};

// End (exclusive) of the aligned chunk window holding t: chunks cover
// [k * span, (k + 1) * span), so sealed chunks of different series line up.
int64_t WindowEnd(int64_t t_ms, int64_t span_ms) {
  int64_t k = t_ms / span_ms;
  if (t_ms % span_ms < 0)
    --k;  // floor for negative times
  return (k + 1) * span_ms;
}

// Encodes samples known to be encodable (sorted, unique, within kMaxChunkSamples by
// construction); anything else is a broken invariant.
std::string EncodeOrDie(const std::vector<Sample>& samples, int zstd_level) {
  Result<std::string> data = EncodeChunk(samples, {.zstd_level = zstd_level});
  if (!data.ok()) {
    std::fprintf(stderr, "tsdb: broken invariant, open chunk does not encode: %s\n",
                 data.status().ToString().c_str());
    std::abort();
  }
  return std::move(data).value();
}

Status ValidateBatch(std::string_view batch_id, const Batch& batch) {
  if (batch_id.empty() || batch_id.size() > kMaxBatchIdBytes) {
    return InvalidArgumentError("batch id must be 1 to " + std::to_string(kMaxBatchIdBytes) +
                                " bytes, got " + std::to_string(batch_id.size()))
        .WithReason("bad_batch_id");
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeriesKeyView key = batch[i].key;
    if (key.compute_id.empty() || key.host.empty() || key.metric.empty()) {
      return InvalidArgumentError("series " + std::to_string(i) +
                                  ": compute_id, host and metric must not be empty")
          .WithReason("bad_series_key");
    }
  }
  return OkStatus();
}

// An open chunk as stored: its checksum holds, and its header says what its row says (the Tsdb
// keeps the row's count and times beside the encoded chunk and trusts them without decoding).
// The checksum, not a whole decode: at a million series a decode of every open chunk would add
// seconds to every start. A chunk that passes it and still does not decode (a bug) is dropped
// when it is next used (OpenSamplesOrDropLocked).
Status CheckStoredHead(const StoredChunk& head) {
  EXPANSE_ASSIGN_OR_RETURN(const ChunkHeader header, ReadChunkHeader(head.data));
  if (header.count == 0 || header.count != head.count || header.first_t_ms != head.start_ms ||
      header.last_t_ms != head.end_ms) {
    return DataLossError("tsdb chunk store: open chunk of " + std::to_string(header.count) +
                         " samples does not match its row")
        .WithReason("chunk_corrupt");
  }
  return OkStatus();
}

// "compute/host/device/metric", for log lines.
std::string Describe(const SeriesKey& key) {
  return key.compute_id + "/" + key.host + "/" + key.device + "/" + key.metric;
}

// Distinguishes this Open from every other, so that a sender holding a mark from before a
// restart knows to send that batch again. Not a secret: uniqueness is all it needs.
std::string NewEpoch() {
  std::random_device random;
  const uint64_t bits = (uint64_t{random()} << 32) ^ random();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

}  // namespace

Result<std::unique_ptr<Tsdb>> Tsdb::Open(TsdbOptions options, Clock& clock) {
  if (options.directory.empty() || options.chunk_span_ms <= 0 || options.max_chunk_samples < 1 ||
      options.max_chunk_samples > kMaxChunkSamples / 2 || options.retention_ms < 0 ||
      options.max_series_per_compute < 1) {
    return InvalidArgumentError(
        "tsdb options: need a directory, chunk_span_ms > 0, 1 <= max_chunk_samples <= " +
        std::to_string(kMaxChunkSamples / 2) +
        ", retention_ms >= 0 and max_series_per_compute >= 1");
  }
  if (!options.log) {
    options.log = [](std::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  struct stat before {};
  const bool existed = ::stat(options.directory.c_str(), &before) == 0;
  // The directory holds the organisations' telemetry: its owner only, whatever the umask.
  if (Status made = fs::MakeDirectories(options.directory, 0700); !made.ok()) {
    return UnavailableError("tsdb: " + made.message()).WithReason("tsdb_io");
  }
  if (struct stat st{}; ::stat(options.directory.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    (void)::chmod(options.directory.c_str(), 0700);  // an older build's; EPERM: not ours
  std::unique_ptr<Tsdb> db(new Tsdb(std::move(options), clock, NewEpoch()));
  const std::string dir = db->options_.directory + "/";
  EXPANSE_ASSIGN_OR_RETURN(db->store_, ChunkStore::Open(dir + kChunkFile));
  EXPANSE_RETURN_IF_ERROR(db->LoadStored());
  EXPANSE_ASSIGN_OR_RETURN(const auto batch_ids, db->store_->LoadBatchIds());
  for (const auto& [id, received_ms] : batch_ids) {
    // An id can be in two windows (one started beside an older one); keep its newest time.
    auto [it, added] = db->persisted_batch_ids_.try_emplace(id, received_ms);
    if (!added)
      it->second = std::max(it->second, received_ms);
  }
  Tsdb* raw = db.get();
  EXPANSE_ASSIGN_OR_RETURN(
      db->wal_,
      Wal::Open(
          dir + kWalFile, [raw](std::string_view payload) { return raw->Replay(payload); },
          db->options_.log));
  // Wal::Open syncs the directory, which makes wal.log and chunks.sqlite durable under their
  // names (SQLite syncs the directory for its journals only); a new directory needs its parent
  // synced as well, or everything acknowledged later could vanish with it.
  if (!existed) {
    std::string directory = db->options_.directory;
    while (directory.size() > 1 && directory.back() == '/')
      directory.pop_back();
    if (Status synced = fs::SyncDirectory(fs::SplitPath(directory).first); !synced.ok())
      return UnavailableError("tsdb: " + synced.message()).WithReason("tsdb_io");
  }
  return db;
}

Status Tsdb::LoadStored() {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<StoredSeries> stored, store_->LoadSeries());
  EXPANSE_ASSIGN_OR_RETURN(std::vector<StoredChunk> heads, store_->LoadHeads());
  std::unordered_map<int64_t, const SeriesKey*> key_of;
  for (const StoredSeries& s : stored)
    key_of.emplace(s.id, &s.key);
  // Checked here, once, so that nothing later has to distrust an open chunk: before, the first
  // seal, flush or query of a series whose row had gone bad aborted the server, at every start.
  std::unordered_map<int64_t, StoredChunk*> head_of;
  std::vector<int64_t> damaged_heads;
  for (StoredChunk& head : heads) {
    if (Status checked = CheckStoredHead(head); !checked.ok()) {
      const auto key = key_of.find(head.series_id);
      options_.log("tsdb: dropping the stored open chunk of series " +
                   (key == key_of.end() ? std::to_string(head.series_id) : Describe(*key->second)) +
                   " (" + std::to_string(head.count) + " samples): " + checked.ToString());
      ++damaged_open_chunks_;
      damaged_heads.push_back(head.series_id);
      continue;
    }
    head_of.emplace(head.series_id, &head);
  }
  const auto has_data = [&](int64_t id, bool has_chunks) {
    return has_chunks || head_of.contains(id);
  };
  std::vector<int64_t> duplicate_series;
  for (const StoredSeries& s : stored) {
    Series& series = IndexedSeries(s.key);
    next_series_id_ = std::max(next_series_id_, s.id + 1);
    if (series.persisted) {
      // The table has no unique key on the labels: checked here. A retention pass whose series
      // delete failed used to forget the series anyway, and the key written again got a second
      // row. A row without data is dropped; two with data are refused, as merging them would
      // have to reconcile two runs of chunks that may overlap in time (tsdb.h's ordering rule).
      const bool kept_has_data = has_data(series.id, series.has_sealed);
      if (kept_has_data && has_data(s.id, s.has_chunks)) {
        return DataLossError("tsdb chunk store: series " + std::to_string(series.id) + " and " +
                             std::to_string(s.id) + " have the same key")
            .WithReason("tsdb_corrupt");
      }
      duplicate_series.push_back(kept_has_data ? s.id : series.id);
      if (kept_has_data)
        continue;
    }
    series.id = s.id;
    series.persisted = true;
    series.has_sealed = s.has_chunks;
    series.sealed_end_ms = s.last_end_ms;
  }
  if (!head_of.empty()) {
    std::unordered_map<int64_t, Series*> by_id;
    for (auto& [key, series] : series_)
      by_id[series.id] = &series;
    for (auto& [id, head] : head_of) {
      const auto it = by_id.find(id);
      if (it == by_id.end())
        continue;  // REFERENCES series(id) keeps this from happening
      Series& series = *it->second;
      series.saved = std::move(head->data);
      series.saved_start_ms = head->start_ms;
      series.saved_end_ms = head->end_ms;
      series.saved_count = head->count;
    }
  }
  DeleteDroppedRows(damaged_heads, duplicate_series);
  return OkStatus();
}

void Tsdb::DeleteDroppedRows(const std::vector<int64_t>& damaged_heads,
                             const std::vector<int64_t>& duplicate_series) {
  if (!damaged_heads.empty()) {
    // Deleted now rather than at the next Flush, so a crash before it does not drop (and
    // count) them again.
    ChunkCommit commit;
    commit.cleared_heads = damaged_heads;
    if (Status deleted = store_->Write(commit); !deleted.ok()) {
      options_.log("tsdb: cannot delete the dropped open chunks yet (" + deleted.ToString() +
                   "); the next flush deletes them");
      for (auto& [key, series] : series_) {
        if (std::find(damaged_heads.begin(), damaged_heads.end(), series.id) != damaged_heads.end())
          series.saved_dirty = true;
      }
    }
  }
  if (!duplicate_series.empty()) {
    // Only while no chunk or open chunk refers to them, which is what made them duplicates.
    options_.log("tsdb: deleting " + std::to_string(duplicate_series.size()) +
                 " series rows without data that repeat another row's key");
    if (Status deleted = store_->DeleteEmptySeries(duplicate_series); !deleted.ok())
      options_.log("tsdb: cannot delete them yet (" + deleted.ToString() +
                   "); the next start tries again");
  }
}

Tsdb::~Tsdb() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  sync_loop_cv_.notify_all();
  if (sync_loop_.joinable())
    sync_loop_.join();
  // Received batches whose sync had not run yet: best effort, their senders still hold them.
  if (wal_ && wal_synced_ < wal_written_ && sync_error_.ok())
    (void)wal_->Sync();
}

void Tsdb::SyncLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (wal_synced_ < received_pending_ && sync_error_.ok()) {
      // As a leader (or behind one): the same group commit as a kDurable append. A failed
      // sync is recorded in sync_error_ and logged there; the loop then waits for a Flush.
      (void)WaitDurableLocked(lock, received_pending_);
      continue;
    }
    sync_loop_cv_.wait(lock);
  }
}

Result<Tsdb::Durability> Tsdb::SyncAll() {
  std::unique_lock lock(mu_);
  EXPANSE_RETURN_IF_ERROR(WaitDurableLocked(lock, wal_written_));
  return Durability{epoch_, wal_synced_};
}

Tsdb::Durability Tsdb::durability() {
  std::lock_guard lock(mu_);
  return Durability{epoch_, wal_synced_};
}

// Replay runs inside Open, before the Tsdb is shared, and reproduces exactly what
// Append did: the same ordering rule against the same sealed state, because the WAL
// only ever holds batches appended since the last Flush. A batch whose id is already in
// the chunk store was persisted by a Flush that crashed before emptying the WAL.
Status Tsdb::Replay(std::string_view payload) {
  EXPANSE_ASSIGN_OR_RETURN(WalBatch record, DecodeWalBatch(payload));
  if (persisted_batch_ids_.contains(record.batch_id) ||
      pending_batch_ids_.contains(record.batch_id)) {
    return OkStatus();
  }
  ApplyLocked(record.series);
  pending_batch_ids_.emplace(std::move(record.batch_id), record.received_ms);
  return OkStatus();
}

Result<Tsdb::AppendResult> Tsdb::Append(std::string_view batch_id, const Batch& batch, Ack ack) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatch(batch_id, batch));
  // Counted as arriving until it holds the mutex. Whatever follows, it writes its record (or
  // decides not to) before it next releases the mutex, which is all a waiting sync leader
  // needs to know. A guard, so that an exception on the way cannot leave the count high.
  struct Arriving {
    Tsdb& db;
    explicit Arriving(Tsdb& d) : db(d) { ++db.arriving_; }
    ~Arriving() {
      if (--db.arriving_ == 0)
        db.arrived_cv_.notify_all();
    }
    Arriving(const Arriving&) = delete;
    Arriving& operator=(const Arriving&) = delete;
  };
  std::optional<Arriving> arriving(std::in_place, *this);
  const int64_t now_ms = clock_.NowMs();
  const std::string record = EncodeWalBatch(batch_id, now_ms, batch);
  std::unique_lock lock(mu_);
  arriving.reset();
  EXPANSE_RETURN_IF_ERROR(sync_error_);
  const std::string id(batch_id);
  if (persisted_batch_ids_.contains(id)) {
    return AppendResult{.duplicate = true, .durable = true, .durable_mark = wal_synced_};
  }
  if (pending_batch_ids_.contains(id)) {
    // Its first Append may still wait for a sync: acknowledge the retry no earlier (or,
    // on receipt, with a mark no earlier than its record's).
    AppendResult result{.duplicate = true, .mark = wal_written_};
    EXPANSE_RETURN_IF_ERROR(FinishAppendLocked(lock, ack, result));
    return result;
  }
  if (Status limit = CheckSeriesLimitLocked(batch); !limit.ok()) {
    ++refused_batches_;
    return limit;
  }
  EXPANSE_RETURN_IF_ERROR(wal_->Write(record));
  AppendResult result;
  result.mark = ++wal_written_;
  result.samples = ApplyLocked(batch);
  pending_batch_ids_.emplace(id, now_ms);
  // After a failed flush, not retried at every append: each try encodes every open chunk
  // and writes everything again under the mutex. A clock that went back retries at once.
  const bool flush_due = auto_flush_failures_ == 0 || now_ms < auto_flush_failed_ms_ ||
                         now_ms - auto_flush_failed_ms_ >= kAutoFlushRetryMs;
  if (wal_->size() >= options_.wal_flush_bytes && flush_due) {
    // The batch is still synced below.
    if (Status status = FlushLocked(); !status.ok()) {
      if (auto_flush_failures_++ == 0) {
        options_.log("tsdb: automatic flush failed: " + status.ToString() + "; retrying every " +
                     std::to_string(kAutoFlushRetryMs / 1000) +
                     " s while the WAL grows (logged again once a flush succeeds)");
      }
      auto_flush_failed_ms_ = now_ms;
    }
  }
  EXPANSE_RETURN_IF_ERROR(FinishAppendLocked(lock, ack, result));
  return result;
}

Status Tsdb::FinishAppendLocked(std::unique_lock<std::mutex>& lock, Ack ack, AppendResult& result) {
  if (ack == Ack::kDurable) {
    EXPANSE_RETURN_IF_ERROR(WaitDurableLocked(lock, result.mark));
  } else if (wal_synced_ < result.mark) {
    if (!sync_loop_.joinable()) {
      try {
        sync_loop_ = std::thread([this] { SyncLoop(); });
      } catch (const std::system_error& error) {
        // No thread to leave the sync to (out of threads or memory): this answer waits for
        // its sync itself, and the next received append tries to start one again.
        options_.log(std::string("tsdb: cannot start the background sync (") + error.what() +
                     "); answering after the sync instead");
        EXPANSE_RETURN_IF_ERROR(WaitDurableLocked(lock, result.mark));
      }
    }
    if (sync_loop_.joinable()) {
      received_pending_ = std::max(received_pending_, result.mark);
      sync_loop_cv_.notify_one();
    }
  }
  result.durable_mark = wal_synced_;
  result.durable = result.mark <= wal_synced_;
  return OkStatus();
}

// The leader/follower scheme of group commit: whoever finds no sync running syncs every
// record written so far, with the mutex released so other appends can write theirs
// meanwhile; they then share the next sync instead of queueing for one each.
Status Tsdb::WaitDurableLocked(std::unique_lock<std::mutex>& lock, uint64_t records) {
  while (wal_synced_ < records) {
    if (!sync_error_.ok())
      return sync_error_;
    if (syncing_) {
      synced_cv_.wait(lock);
      continue;
    }
    syncing_ = true;
    arrived_cv_.wait_for(lock, kSyncGatherWindow, [this] { return arriving_.load() == 0; });
    const uint64_t covers = wal_written_;
    lock.unlock();
    Status status = wal_->Sync();
    lock.lock();
    syncing_ = false;
    if (status.ok()) {
      wal_synced_ = std::max(wal_synced_, covers);
    } else {
      options_.log("tsdb: " + status.ToString() +
                   "; refusing appends until a flush succeeds (unacknowledged batches are "
                   "retried by their senders)");
      sync_error_ = std::move(status);
    }
    synced_cv_.notify_all();
  }
  return OkStatus();
}

size_t Tsdb::SeriesKeyHash::operator()(const SeriesKeyView& k) const {
  const std::hash<std::string_view> hash;
  size_t h = hash(k.compute_id);
  for (const std::string_view part : {k.host, k.device, k.metric})
    h = h * 0x9e3779b97f4a7c15ULL + hash(part);
  return h;
}

Tsdb::Series* Tsdb::FindSeries(const SeriesKeyView& key) {
  const auto it = series_index_.find(key);
  return it == series_index_.end() ? nullptr : it->second;
}

Status Tsdb::CheckSeriesLimitLocked(const Batch& batch) {
  // Only series with samples are created (ApplyLocked), each once however often it repeats.
  std::unordered_map<std::string_view, size_t> new_per_compute;
  std::unordered_set<SeriesKeyView, SeriesKeyHash> new_keys;
  for (const auto& [key, samples] : batch) {
    if (samples.empty() || FindSeries(key) != nullptr)
      continue;
    if (new_keys.insert(key).second)
      ++new_per_compute[key.compute_id];
  }
  for (const auto& [compute_id, added] : new_per_compute) {
    const auto it = series_per_compute_.find(std::string(compute_id));
    const size_t held = it == series_per_compute_.end() ? 0 : it->second;
    if (held + added > options_.max_series_per_compute) {
      return ResourceExhaustedError(
                 "the batch adds " + std::to_string(added) + " new series to a compute that has " +
                 std::to_string(held) + "; at most " +
                 std::to_string(options_.max_series_per_compute) +
                 " series per compute are kept, so nothing of the batch was stored")
          .WithReason("series_limit");
    }
  }
  return OkStatus();
}

void Tsdb::ForgetSeriesLocked(std::map<SeriesKey, Series>::iterator it) {
  const auto count = series_per_compute_.find(it->first.compute_id);
  if (count != series_per_compute_.end() && --count->second == 0)
    series_per_compute_.erase(count);
  series_index_.erase(SeriesKeyView(it->first));
  series_.erase(it);
}

Tsdb::Series& Tsdb::IndexedSeries(const SeriesKeyView& key, bool* inserted) {
  if (Series* found = FindSeries(key)) {
    if (inserted)
      *inserted = false;
    return *found;
  }
  const auto it = series_.try_emplace(OwnedKey(key)).first;
  Series& series = it->second;
  series_index_.emplace(SeriesKeyView(it->first), &series);
  ++series_per_compute_[it->first.compute_id];
  if (inserted)
    *inserted = true;
  return series;
}

Tsdb::Series& Tsdb::SeriesFor(const SeriesKeyView& key) {
  bool inserted = false;
  Series& series = IndexedSeries(key, &inserted);
  if (inserted)
    series.id = next_series_id_++;
  return series;
}

size_t Tsdb::ApplyLocked(const Batch& batch) {
  size_t accepted = 0;
  for (const auto& [key, samples] : batch) {
    if (!samples.empty())
      accepted += ApplySeriesLocked(SeriesFor(key), samples);
  }
  return accepted;
}

size_t Tsdb::ApplySeriesLocked(Series& series, std::span<const Sample> samples) {
  size_t accepted = 0;
  std::vector<Sample>& head = series.head;
  // The open chunk's extent (saved and head together), kept up to date below rather than
  // recomputed per sample: this loop runs for every sample ingested.
  size_t open_count = series.saved_count + head.size();
  int64_t open_first_ms = 0, open_last_ms = 0, window_end_ms = 0;
  if (open_count > 0) {
    open_first_ms = series.saved_count > 0 ? series.saved_start_ms : head.front().t_ms;
    open_last_ms = series.saved_count > 0 ? series.saved_end_ms : head.back().t_ms;
    if (!head.empty()) {
      open_first_ms = std::min(open_first_ms, head.front().t_ms);
      open_last_ms = std::max(open_last_ms, head.back().t_ms);
    }
    window_end_ms = WindowEnd(open_first_ms, options_.chunk_span_ms);
  }
  for (const Sample& s : samples) {
    if (series.has_sealed && s.t_ms <= series.sealed_end_ms) {
      ++dropped_samples_;
      continue;
    }
    if (open_count == 0 || s.t_ms > open_last_ms) {
      if (open_count > 0 && (open_count >= options_.max_chunk_samples || s.t_ms >= window_end_ms)) {
        SealLocked(series);
        open_count = 0;
      }
      if (open_count == 0) {
        open_first_ms = s.t_ms;
        window_end_ms = WindowEnd(s.t_ms, options_.chunk_span_ms);
      }
      head.push_back(s);
      ++open_count;
      open_last_ms = s.t_ms;
      ++accepted;
      continue;
    }
    // Out of order but newer than anything sealed: keep the head sorted. A timestamp
    // also held in `saved` is replaced when the two are merged.
    auto it = std::lower_bound(head.begin(), head.end(), s.t_ms,
                               [](const Sample& a, int64_t t) { return a.t_ms < t; });
    if (it != head.end() && it->t_ms == s.t_ms) {
      it->v = s.v;
    } else if (open_count >= kMaxChunkSamples) {
      ++dropped_samples_;
      continue;
    } else {
      head.insert(it, s);
      ++open_count;
      if (s.t_ms < open_first_ms) {
        open_first_ms = s.t_ms;
        window_end_ms = WindowEnd(s.t_ms, options_.chunk_span_ms);
      }
    }
    ++accepted;
  }
  return accepted;
}

Result<std::vector<Sample>> Tsdb::OpenSamples(const Series& series) {
  if (series.saved_count == 0)
    return series.head;
  Result<std::vector<Sample>> saved = DecodeChunk(series.saved);
  if (!saved.ok()) {
    return DataLossError("tsdb: the open chunk of series " + std::to_string(series.id) +
                         " does not decode: " + saved.status().message())
        .WithReason("chunk_corrupt");
  }
  if (series.head.empty())
    return std::move(saved).value();
  std::vector<Sample> merged;
  merged.reserve(saved->size() + series.head.size());
  auto a = saved->begin();
  auto b = series.head.begin();
  while (a != saved->end() || b != series.head.end()) {
    if (b == series.head.end() || (a != saved->end() && a->t_ms < b->t_ms)) {
      merged.push_back(*a++);
    } else {
      if (a != saved->end() && a->t_ms == b->t_ms)
        ++a;  // the later sample wins
      merged.push_back(*b++);
    }
  }
  return merged;
}

std::vector<Sample> Tsdb::OpenSamplesOrDropLocked(Series& series) {
  Result<std::vector<Sample>> samples = OpenSamples(series);
  if (samples.ok())
    return std::move(samples).value();
  // Lost either way; kept, it would fail every later seal, flush and query of the series.
  options_.log(samples.status().ToString() + "; dropping its " +
               std::to_string(series.saved_count) + " samples as of the last flush");
  ++damaged_open_chunks_;
  series.saved.clear();
  series.saved_count = 0;
  series.saved_dirty = true;  // its heads row goes, or is replaced, at the next Flush
  return series.head;
}

void Tsdb::SealLocked(Series& series) {
  if (series.head.empty() && series.saved_count == 0)
    return;
  const std::vector<Sample> samples = OpenSamplesOrDropLocked(series);
  if (samples.empty())
    return;  // there was only an open chunk that did not decode
  series.pending.push_back({series.id, samples.front().t_ms, samples.back().t_ms,
                            static_cast<uint32_t>(samples.size()),
                            EncodeOrDie(samples, options_.zstd_level)});
  series.has_sealed = true;
  series.sealed_end_ms = samples.back().t_ms;
  series.head.clear();
  if (series.saved_count > 0) {
    series.saved.clear();
    series.saved_count = 0;
    series.saved_dirty = true;  // its row in the heads table goes at the next Flush
  }
}

void Tsdb::SaveHeadLocked(Series& series) {
  if (series.head.empty())
    return;
  const std::vector<Sample> samples = OpenSamplesOrDropLocked(series);
  series.saved = EncodeOrDie(samples, options_.zstd_level);
  series.saved_start_ms = samples.front().t_ms;
  series.saved_end_ms = samples.back().t_ms;
  series.saved_count = static_cast<uint32_t>(samples.size());
  series.saved_dirty = true;
  series.head.clear();
}

Status Tsdb::Flush() {
  std::lock_guard lock(mu_);
  return FlushLocked();
}

// Crash safety: the chunk store commit is atomic and holds everything the WAL's batches
// added (sealed chunks, open chunks, batch ids), so a crash before wal_->Reset() leaves
// batches that Replay recognises by id and skips; a crash before the commit leaves the
// previous commit and the whole WAL, which Replay applies to it as Append did.
Status Tsdb::FlushLocked() {
  ChunkCommit commit;
  std::vector<Series*> saved;
  // The series whose sealed chunks go into the commit, by id, to put them back should it fail.
  std::unordered_map<int64_t, Series*> chunks_of;
  size_t open_chunks = 0;
  for (auto& [key, series] : series_) {
    SaveHeadLocked(series);
    if (!series.persisted && (!series.pending.empty() || series.saved_count > 0))
      commit.new_series.emplace_back(series.id, key);
    if (!series.pending.empty())
      chunks_of.emplace(series.id, &series);
    for (StoredChunk& chunk : series.pending)
      commit.chunks.push_back(std::move(chunk));
    series.pending.clear();
    open_chunks += series.saved_count > 0 ? 1 : 0;
    if (series.saved_dirty)
      saved.push_back(&series);
  }
  // Open chunks grow between flushes, and a grown row replaced in place splits its page: after
  // a few flushes half of the heads table was free space. When most rows change anyway, the
  // table is rewritten whole, in order, which packs its pages; otherwise rows are replaced.
  commit.replace_all_heads = saved.size() * 2 >= open_chunks && !saved.empty();
  for (auto& [key, series] : series_) {
    if (!series.saved_dirty && !(commit.replace_all_heads && series.saved_count > 0))
      continue;
    if (series.saved_count > 0) {
      commit.heads.push_back({series.id, series.saved_start_ms, series.saved_end_ms,
                              series.saved_count, series.saved});
    } else if (!commit.replace_all_heads) {
      commit.cleared_heads.push_back(series.id);
    }
  }
  commit.batch_ids.assign(pending_batch_ids_.begin(), pending_batch_ids_.end());
  // In key order, rows go in at the end of their b-trees and fill pages; in the series map's
  // order (by name) they land all over and split pages half-empty.
  const auto by_series = [](const StoredChunk& a, const StoredChunk& b) {
    return std::tie(a.series_id, a.start_ms) < std::tie(b.series_id, b.start_ms);
  };
  std::sort(commit.chunks.begin(), commit.chunks.end(), by_series);
  std::sort(commit.heads.begin(), commit.heads.end(), by_series);
  std::sort(commit.batch_ids.begin(), commit.batch_ids.end());
  if (Status status = store_->Write(commit); !status.ok()) {
    // Put the chunks back so a later Flush retries them (open chunks stay dirty); the WAL
    // still holds the data. By id: at a window boundary there are about as many chunks as
    // series. Sorted by start within a series, so each pending list is as it was.
    for (StoredChunk& chunk : commit.chunks)
      chunks_of.at(chunk.series_id)->pending.push_back(std::move(chunk));
    ++failed_flushes_;
    return status;
  }
  for (const auto& [id, key] : commit.new_series)
    FindSeries(key)->persisted = true;
  for (Series* series : saved)
    series->saved_dirty = false;
  persisted_batch_ids_.insert(pending_batch_ids_.begin(), pending_batch_ids_.end());
  pending_batch_ids_.clear();
  // Every record written so far is now in the committed chunk store.
  wal_synced_ = wal_written_;
  synced_cv_.notify_all();
  if (Status reset = wal_->Reset(); !reset.ok()) {
    ++failed_flushes_;
    return reset;
  }
  sync_error_ = OkStatus();  // the WAL is empty and synced again
  if (auto_flush_failures_ > 0) {
    options_.log("tsdb: flush succeeded after " + std::to_string(auto_flush_failures_) +
                 " failed automatic attempts");
    auto_flush_failures_ = 0;
  }
  return store_->Checkpoint();
}

Status Tsdb::CheckSeriesLimit(const Batch& batch) {
  std::lock_guard lock(mu_);
  return CheckSeriesLimitLocked(batch);
}

// One question of QueryMany: the two read the same chunks the same way, and a damaged chunk
// is skipped by both.
Result<std::vector<Bucket>> Tsdb::Query(const SeriesKey& key, int64_t from_ms, int64_t to_ms,
                                        int points) {
  EXPANSE_ASSIGN_OR_RETURN(
      std::vector<std::vector<Bucket>> answers,
      QueryMany({SeriesQuery{.key = key, .from_ms = from_ms, .to_ms = to_ms, .points = points}}));
  return std::move(answers.front());
}

Result<std::vector<std::vector<Bucket>>> Tsdb::QueryMany(const std::vector<SeriesQuery>& queries) {
  std::vector<Downsampler> samplers;
  samplers.reserve(queries.size());
  for (const SeriesQuery& q : queries) {
    EXPANSE_ASSIGN_OR_RETURN(Downsampler sampler,
                             Downsampler::Create(q.from_ms, q.to_ms, q.points));
    samplers.push_back(std::move(sampler));
  }
  // Grouped by series, in series id order: the chunk store's rows are in that order too.
  std::map<int64_t, std::vector<size_t>> by_series;
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < queries.size(); ++i) {
      if (const Series* series = FindSeries(queries[i].key))
        by_series[series->id].push_back(i);
    }
  }
  // The lock is taken per series, not for the whole list: a page of a thousand long jobs
  // decodes billions of samples, and every Append waits for this lock. Each series is read
  // whole at one moment; one forgotten meanwhile (or its key given to a new series) is
  // answered as absent.
  for (const auto& [id, which] : by_series) {
    std::lock_guard lock(mu_);
    Series* series = FindSeries(queries[which.front()].key);
    if (series == nullptr || series->id != id)
      continue;
    EXPANSE_RETURN_IF_ERROR(FeedQueriesLocked(*series, queries, which, samplers));
  }
  std::vector<std::vector<Bucket>> answers;
  answers.reserve(samplers.size());
  for (Downsampler& sampler : samplers)
    answers.push_back(std::move(sampler).Finish());
  return answers;
}

// For each query the chunks that overlap it (persisted, then pending, then the open chunk), in
// time order. A chunk that does not decode is skipped (NoteDamagedChunkLocked): its samples are
// lost either way, and failing the read would fail every page that shows the series.
Status Tsdb::FeedQueriesLocked(Series& series, const std::vector<SeriesQuery>& queries,
                               const std::vector<size_t>& which,
                               std::vector<Downsampler>& samplers) {
  const SeriesKey& key = queries[which.front()].key;
  const auto feed_chunk = [&](int64_t start_ms, int64_t end_ms, std::string_view data) {
    std::optional<std::vector<Sample>> samples;  // decoded for the first query that needs it
    for (const size_t i : which) {
      if (start_ms >= queries[i].to_ms || end_ms < queries[i].from_ms)
        continue;
      if (!samples) {
        Result<std::vector<Sample>> decoded = DecodeChunk(data);
        if (!decoded.ok()) {
          NoteDamagedChunkLocked(key, series.id, start_ms, decoded.status());
          return;
        }
        samples = std::move(decoded).value();
      }
      for (const Sample& s : *samples)
        samplers[i].Add(s);
    }
  };
  if (series.persisted) {
    std::vector<std::pair<int64_t, int64_t>> windows;
    for (const size_t i : which)
      windows.emplace_back(queries[i].from_ms, queries[i].to_ms);
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<StoredChunk> chunks,
                             store_->ReadChunksOverlapping(series.id, std::move(windows)));
    for (const StoredChunk& chunk : chunks)
      feed_chunk(chunk.start_ms, chunk.end_ms, chunk.data);
  }
  for (const StoredChunk& chunk : series.pending)
    feed_chunk(chunk.start_ms, chunk.end_ms, chunk.data);
  if (series.saved_count == 0) {
    for (const size_t i : which) {
      for (const Sample& s : series.head)
        samplers[i].Add(s);
    }
    return OkStatus();
  }
  std::optional<std::vector<Sample>> open;  // decoded for the first query that needs it
  for (const size_t i : which) {
    if (series.saved_end_ms < queries[i].from_ms &&
        (series.head.empty() || series.head.back().t_ms < queries[i].from_ms))
      continue;
    if (!open)
      open = OpenSamplesOrDropLocked(series);
    for (const Sample& s : *open)
      samplers[i].Add(s);
  }
  return OkStatus();
}

Result<std::vector<SeriesKey>> Tsdb::ListSeries(std::string_view compute_id,
                                                std::string_view host_prefix) {
  std::lock_guard lock(mu_);
  std::vector<SeriesKey> out;
  for (auto it = series_.lower_bound(SeriesKey{std::string(compute_id), "", "", ""});
       it != series_.end() && it->first.compute_id == compute_id; ++it) {
    if (it->first.host.starts_with(host_prefix))
      out.push_back(it->first);
  }
  return out;
}

Status Tsdb::ApplyRetention() {
  std::lock_guard lock(mu_);
  const int64_t now_ms = clock_.NowMs();
  const int64_t cutoff_ms = options_.retention_ms > 0 ? now_ms - options_.retention_ms : INT64_MIN;
  const int64_t batch_cutoff_ms =
      now_ms - std::max(options_.retention_ms, options_.batch_id_retention_ms);
  EXPANSE_ASSIGN_OR_RETURN(const int64_t dropped, store_->DeleteBefore(cutoff_ms, batch_cutoff_ms));
  (void)dropped;
  std::vector<std::map<SeriesKey, Series>::iterator> emptied;
  std::vector<int64_t> emptied_ids;  // of those with a row
  for (auto it = series_.begin(); it != series_.end(); ++it) {
    Series& series = it->second;
    std::erase_if(series.pending, [&](const StoredChunk& c) { return c.end_ms < cutoff_ms; });
    if (series.saved_count > 0 && series.saved_end_ms < cutoff_ms) {
      series.saved.clear();  // DeleteBefore dropped its row
      series.saved_count = 0;
    }
    // Nothing left anywhere: no sealed chunk newer than the cutoff (so none at all on disk),
    // no open chunk, nothing pending. Only with a retention: without one, sealed data stays.
    const bool empty = options_.retention_ms > 0 && series.pending.empty() &&
                       series.saved_count == 0 && series.head.empty() &&
                       (!series.has_sealed || series.sealed_end_ms < cutoff_ms);
    if (!empty)
      continue;
    emptied.push_back(it);
    if (series.persisted)
      emptied_ids.push_back(series.id);
  }
  // DeleteBefore has forgotten them on disk already.
  std::erase_if(persisted_batch_ids_,
                [&](const auto& entry) { return entry.second < batch_cutoff_ms; });
  // Their rows go too, or a restart would load them again; the chunk store deletes a row only
  // while no chunk refers to it. Forgotten in memory only once that has committed: a series
  // forgotten while its row stays gets a new id when written again, then a second row with the
  // same key. After a failed delete they stay, empty, and the next pass tries again.
  EXPANSE_RETURN_IF_ERROR(store_->DeleteEmptySeries(emptied_ids));
  for (const auto it : emptied)
    ForgetSeriesLocked(it);
  return OkStatus();
}

void Tsdb::NoteDamagedChunkLocked(const SeriesKey& key, int64_t series_id, int64_t start_ms,
                                  const Status& error) {
  if (damaged_chunks_.size() >= kMaxDamagedChunksNoted ||
      !damaged_chunks_.emplace(series_id, start_ms).second)
    return;
  options_.log("tsdb: skipping a chunk of series " + Describe(key) + " from " +
               std::to_string(start_ms) + " ms that does not decode: " + error.ToString());
}

Tsdb::Stats Tsdb::GetStats() {
  std::lock_guard lock(mu_);
  Stats stats;
  stats.series = series_.size();
  stats.dropped_samples = dropped_samples_;
  stats.refused_batches = refused_batches_;
  stats.damaged_open_chunks = damaged_open_chunks_;
  stats.damaged_chunks = damaged_chunks_.size();
  stats.failed_flushes = failed_flushes_;
  stats.damaged_wal_records = wal_->skipped_records();
  if (Result<ChunkStore::Totals> totals = store_->GetTotals(); totals.ok()) {
    stats.chunks = totals->chunks;
    stats.samples = totals->samples;
  }
  for (const auto& [key, series] : series_) {
    stats.chunks += series.pending.size();
    for (const StoredChunk& c : series.pending)
      stats.samples += c.count;
    stats.samples += series.saved_count + series.head.size();
  }
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.directory, error)) {
    if (entry.is_regular_file(error))
      stats.bytes_on_disk += entry.file_size(error);
  }
  return stats;
}

}  // namespace expanse::tsdb
