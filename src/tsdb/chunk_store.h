// Internal to the tsdb module: sealed chunks, the open (unsealed) chunk of each series as of
// the last Flush, series ids and remembered batch ids in one SQLite file
// (docs/formats/tsdb-wal.md, "Chunk store"). WAL journal mode with
// synchronous=FULL, so a committed Write survives power loss. Not thread-safe: the
// Tsdb serialises calls.
#ifndef EXPANSE_TSDB_CHUNK_STORE_H_
#define EXPANSE_TSDB_CHUNK_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.h"
#include "tsdb/sample.h"

struct sqlite3;

namespace expanse::tsdb {

class Statement;

struct StoredChunk {
  int64_t series_id = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;  // inclusive: the last sample's timestamp
  uint32_t count = 0;
  std::string data;  // an encoded chunk (chunk_codec.h)
};

struct StoredSeries {
  int64_t id = 0;
  SeriesKey key;
  int64_t last_end_ms = 0;  // latest sealed sample; meaningful when has_chunks
  bool has_chunks = false;
};

// Everything one Flush persists, written in a single transaction.
struct ChunkCommit {
  std::vector<std::pair<int64_t, SeriesKey>> new_series;
  std::vector<StoredChunk> chunks;
  // Open chunks, replacing the series' previous one; at most one per series.
  std::vector<StoredChunk> heads;
  std::vector<int64_t> cleared_heads;  // series whose open chunk was sealed since
  // `heads` holds every open chunk: the table is emptied and written anew.
  bool replace_all_heads = false;
  std::vector<std::pair<std::string, int64_t>> batch_ids;  // id, received_ms
};

class ChunkStore {
 public:
  static Result<std::unique_ptr<ChunkStore>> Open(const std::string& path);
  ~ChunkStore();
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  Result<std::vector<StoredSeries>> LoadSeries();
  // Every remembered batch id with its receive time; an id can appear twice (in two
  // overlapping windows), the caller keeps the later time.
  Result<std::vector<std::pair<std::string, int64_t>>> LoadBatchIds();
  // The open chunk of every series that has one.
  Result<std::vector<StoredChunk>> LoadHeads();
  Status Write(const ChunkCommit& commit);
  // The chunks of the series that overlap any of `windows` ([from_ms, to_ms) each: start_ms <
  // to_ms and end_ms >= from_ms), each once, by start time, without reading a chunk twice. Every
  // call runs the one statement the store keeps prepared, once per run of overlapping windows.
  // Relies on a series' chunks not overlapping in time (tsdb.h's ordering rule).
  Result<std::vector<StoredChunk>> ReadChunksOverlapping(
      int64_t series_id, std::vector<std::pair<int64_t, int64_t>> windows);
  // Drops chunks and open chunks whose last sample is before cutoff_ms, and batch ids
  // received before batch_cutoff_ms (sequence ids by window: once the window's newest member
  // is that old); returns the number of sealed chunks dropped.
  Result<int64_t> DeleteBefore(int64_t cutoff_ms, int64_t batch_cutoff_ms);
  // Deletes the rows of these series that no chunk or open chunk refers to any more.
  Status DeleteEmptySeries(const std::vector<int64_t>& series_ids);
  struct Totals {  // sealed chunks only
    uint64_t chunks = 0;
    uint64_t samples = 0;
  };
  Result<Totals> GetTotals();
  // Folds SQLite's own WAL into the main file, so the size on disk is the size at rest.
  Status Checkpoint() { return Exec("PRAGMA wal_checkpoint(TRUNCATE)"); }

 private:
  explicit ChunkStore(sqlite3* db);  // in the .cc, where Statement is complete
  Status Exec(const char* sql);
  Status LoadLabels();
  // Creates the tables of a new file or upgrades an older one, in one transaction.
  Status Upgrade(const std::string& path);
  // The row id of a batch stream name ("<compute>/<stream>"), added if new. Inside Write's
  // transaction; cached only once that commits.
  Result<int64_t> StreamId(const std::string& name);
  // The id of `name` in a (id INTEGER PRIMARY KEY, name TEXT UNIQUE) table, added if new.
  Result<int64_t> NameId(const char* table, const std::string& name);
  // The row id of a label (a compute id, host, device or metric name), added if new and then
  // remembered in `added` until Write commits.
  Result<int64_t> LabelId(const std::string& name, std::unordered_map<std::string, int64_t>& added);
  // Inside Write's transaction: text ids to batch_ids, stream sequences to batch_windows;
  // streams added on the way are put in new_streams.
  Status WriteBatchIds(const std::vector<std::pair<std::string, int64_t>>& batch_ids,
                       std::unordered_map<std::string, int64_t>& new_streams);

  sqlite3* db_;
  // ReadChunksOverlapping's statement, prepared at its first call; finalized before db_ closes.
  std::unique_ptr<Statement> read_overlapping_;
  std::unordered_map<std::string, int64_t> stream_ids_;  // committed batch_streams rows
  std::unordered_map<std::string, int64_t> label_ids_;   // committed labels rows
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_CHUNK_STORE_H_
