#include "tsdb/tsdb.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "tsdb/chunk_codec.h"

namespace expanse::tsdb {
namespace {

constexpr const char* kWalFile = "wal.log";
constexpr const char* kChunkFile = "chunks.sqlite";

// End (exclusive) of the aligned chunk window holding t: chunks cover
// [k * span, (k + 1) * span), so sealed chunks of different series line up.
int64_t WindowEnd(int64_t t_ms, int64_t span_ms) {
  int64_t k = t_ms / span_ms;
  if (t_ms % span_ms < 0)
    --k;  // floor for negative times
  return (k + 1) * span_ms;
}

Status ValidateBatch(std::string_view batch_id, const Batch& batch) {
  if (batch_id.empty() || batch_id.size() > kMaxBatchIdBytes) {
    return InvalidArgumentError("batch id must be 1 to " + std::to_string(kMaxBatchIdBytes) +
                                " bytes, got " + std::to_string(batch_id.size()))
        .WithReason("bad_batch_id");
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeriesKey& key = batch[i].first;
    if (key.compute_id.empty() || key.host.empty() || key.metric.empty()) {
      return InvalidArgumentError("series " + std::to_string(i) +
                                  ": compute_id, host and metric must not be empty")
          .WithReason("bad_series_key");
    }
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<Tsdb>> Tsdb::Open(TsdbOptions options, Clock& clock) {
  if (options.directory.empty() || options.chunk_span_ms <= 0 || options.max_chunk_samples < 1 ||
      options.max_chunk_samples > kMaxChunkSamples / 2 || options.retention_ms < 0) {
    return InvalidArgumentError(
        "tsdb options: need a directory, chunk_span_ms > 0, 1 <= max_chunk_samples <= " +
        std::to_string(kMaxChunkSamples / 2) + " and retention_ms >= 0");
  }
  if (!options.log) {
    options.log = [](std::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  std::error_code error;
  std::filesystem::create_directories(options.directory, error);
  if (error) {
    return UnavailableError("tsdb: cannot create " + options.directory + ": " + error.message())
        .WithReason("tsdb_io");
  }
  std::unique_ptr<Tsdb> db(new Tsdb(std::move(options), clock));
  const std::string dir = db->options_.directory + "/";
  EXPANSE_ASSIGN_OR_RETURN(db->store_, ChunkStore::Open(dir + kChunkFile));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<StoredSeries> stored, db->store_->LoadSeries());
  for (const StoredSeries& s : stored) {
    Series& series = db->series_[s.key];
    series.id = s.id;
    series.persisted = true;
    series.has_sealed = s.has_chunks;
    series.sealed_end_ms = s.last_end_ms;
    db->next_series_id_ = std::max(db->next_series_id_, s.id + 1);
  }
  EXPANSE_ASSIGN_OR_RETURN(const auto batch_ids, db->store_->LoadBatchIds());
  db->persisted_batch_ids_.insert(batch_ids.begin(), batch_ids.end());
  Tsdb* raw = db.get();
  EXPANSE_ASSIGN_OR_RETURN(
      db->wal_,
      Wal::Open(
          dir + kWalFile, [raw](std::string_view payload) { return raw->Replay(payload); },
          db->options_.log));
  return db;
}

Tsdb::~Tsdb() = default;

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

Result<Tsdb::AppendResult> Tsdb::Append(std::string_view batch_id, const Batch& batch) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatch(batch_id, batch));
  const int64_t now_ms = clock_.NowMs();
  const std::string record = EncodeWalBatch(batch_id, now_ms, batch);
  std::unique_lock lock(mu_);
  EXPANSE_RETURN_IF_ERROR(sync_error_);
  const std::string id(batch_id);
  if (persisted_batch_ids_.contains(id)) {
    return AppendResult{.duplicate = true};
  }
  if (pending_batch_ids_.contains(id)) {
    // Its first Append may still wait for a sync: acknowledge the retry no earlier.
    EXPANSE_RETURN_IF_ERROR(WaitDurableLocked(lock, wal_written_));
    return AppendResult{.duplicate = true};
  }
  EXPANSE_RETURN_IF_ERROR(wal_->Write(record));
  const uint64_t mine = ++wal_written_;
  AppendResult result;
  result.samples = ApplyLocked(batch);
  pending_batch_ids_.emplace(id, now_ms);
  if (wal_->size() >= options_.wal_flush_bytes) {
    // A failed flush is retried next time; the batch is still synced below.
    if (Status status = FlushLocked(); !status.ok()) {
      options_.log("tsdb: automatic flush failed: " + status.ToString());
    }
  }
  EXPANSE_RETURN_IF_ERROR(WaitDurableLocked(lock, mine));
  return result;
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

Tsdb::Series& Tsdb::SeriesFor(const SeriesKey& key) {
  auto [it, inserted] = series_.try_emplace(key);
  if (inserted)
    it->second.id = next_series_id_++;
  return it->second;
}

size_t Tsdb::ApplyLocked(const Batch& batch) {
  size_t accepted = 0;
  for (const auto& [key, samples] : batch) {
    if (!samples.empty())
      accepted += ApplySeriesLocked(SeriesFor(key), samples);
  }
  return accepted;
}

size_t Tsdb::ApplySeriesLocked(Series& series, const std::vector<Sample>& samples) {
  size_t accepted = 0;
  for (const Sample& s : samples) {
    std::vector<Sample>& head = series.head;
    if (series.has_sealed && s.t_ms <= series.sealed_end_ms) {
      ++dropped_samples_;
      continue;
    }
    if (head.empty() || s.t_ms > head.back().t_ms) {
      if (!head.empty() && (head.size() >= options_.max_chunk_samples ||
                            s.t_ms >= WindowEnd(head.front().t_ms, options_.chunk_span_ms))) {
        SealLocked(series);
      }
      head.push_back(s);
      ++accepted;
      continue;
    }
    // Out of order but newer than anything sealed: keep the head sorted.
    auto it = std::lower_bound(head.begin(), head.end(), s.t_ms,
                               [](const Sample& a, int64_t t) { return a.t_ms < t; });
    if (it != head.end() && it->t_ms == s.t_ms) {
      it->v = s.v;
    } else if (head.size() >= kMaxChunkSamples) {
      ++dropped_samples_;
      continue;
    } else {
      head.insert(it, s);
    }
    ++accepted;
  }
  return accepted;
}

void Tsdb::SealLocked(Series& series) {
  if (series.head.empty())
    return;
  Result<std::string> data = EncodeChunk(series.head, {.zstd_level = options_.zstd_level});
  if (!data.ok()) {
    // The head is sorted, unique and within kMaxChunkSamples by construction.
    std::fprintf(stderr, "tsdb: broken invariant, head chunk does not encode: %s\n",
                 data.status().ToString().c_str());
    std::abort();
  }
  series.pending.push_back({series.id, series.head.front().t_ms, series.head.back().t_ms,
                            static_cast<uint32_t>(series.head.size()), std::move(data).value()});
  series.has_sealed = true;
  series.sealed_end_ms = series.head.back().t_ms;
  series.head.clear();
}

Status Tsdb::Flush() {
  std::lock_guard lock(mu_);
  return FlushLocked();
}

// Crash safety: the chunk store commit is atomic and includes the batch ids, so a crash
// before wal_->Reset() leaves batches that Replay recognises and skips.
Status Tsdb::FlushLocked() {
  ChunkCommit commit;
  for (auto& [key, series] : series_) {
    SealLocked(series);
    if (!series.persisted && !series.pending.empty())
      commit.new_series.emplace_back(series.id, key);
    for (StoredChunk& chunk : series.pending)
      commit.chunks.push_back(std::move(chunk));
    series.pending.clear();
  }
  commit.batch_ids.assign(pending_batch_ids_.begin(), pending_batch_ids_.end());
  if (Status status = store_->Write(commit); !status.ok()) {
    // Put the chunks back so a later Flush retries them; the WAL still holds the data.
    for (StoredChunk& chunk : commit.chunks) {
      for (auto& [key, series] : series_) {
        if (series.id == chunk.series_id)
          series.pending.push_back(std::move(chunk));
      }
    }
    return status;
  }
  for (const auto& [id, key] : commit.new_series)
    series_[key].persisted = true;
  persisted_batch_ids_.insert(pending_batch_ids_.begin(), pending_batch_ids_.end());
  pending_batch_ids_.clear();
  // Every record written so far is now in the committed chunk store.
  wal_synced_ = wal_written_;
  synced_cv_.notify_all();
  EXPANSE_RETURN_IF_ERROR(wal_->Reset());
  sync_error_ = OkStatus();  // the WAL is empty and synced again
  return store_->Checkpoint();
}

Result<std::vector<Bucket>> Tsdb::Query(const SeriesKey& key, int64_t from_ms, int64_t to_ms,
                                        int points) {
  EXPANSE_ASSIGN_OR_RETURN(Downsampler sampler, Downsampler::Create(from_ms, to_ms, points));
  std::lock_guard lock(mu_);
  const auto it = series_.find(key);
  if (it == series_.end())
    return std::move(sampler).Finish();
  const Series& series = it->second;
  const auto add_chunk = [&](std::string_view data) -> Status {
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<Sample> samples, DecodeChunk(data));
    for (const Sample& s : samples)
      sampler.Add(s);
    return OkStatus();
  };
  if (series.persisted) {
    EXPANSE_ASSIGN_OR_RETURN(const auto chunks, store_->ReadChunks(series.id, from_ms, to_ms));
    for (const std::string& data : chunks)
      EXPANSE_RETURN_IF_ERROR(add_chunk(data));
  }
  for (const StoredChunk& chunk : series.pending) {
    if (chunk.start_ms < to_ms && chunk.end_ms >= from_ms) {
      EXPANSE_RETURN_IF_ERROR(add_chunk(chunk.data));
    }
  }
  for (const Sample& s : series.head)
    sampler.Add(s);
  return std::move(sampler).Finish();
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
  for (auto& [key, series] : series_) {
    std::erase_if(series.pending, [&](const StoredChunk& c) { return c.end_ms < cutoff_ms; });
  }
  std::erase_if(persisted_batch_ids_,
                [&](const auto& entry) { return entry.second < batch_cutoff_ms; });
  return OkStatus();
}

Tsdb::Stats Tsdb::GetStats() {
  std::lock_guard lock(mu_);
  Stats stats;
  stats.series = series_.size();
  stats.dropped_samples = dropped_samples_;
  if (Result<ChunkStore::Totals> totals = store_->GetTotals(); totals.ok()) {
    stats.chunks = totals->chunks;
    stats.samples = totals->samples;
  }
  for (const auto& [key, series] : series_) {
    stats.chunks += series.pending.size();
    for (const StoredChunk& c : series.pending)
      stats.samples += c.count;
    stats.samples += series.head.size();
  }
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.directory, error)) {
    if (entry.is_regular_file(error))
      stats.bytes_on_disk += entry.file_size(error);
  }
  return stats;
}

}  // namespace expanse::tsdb
