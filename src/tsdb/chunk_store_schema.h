// Internal to the tsdb module: the chunk store's tables, and the upgrade of files that
// earlier builds wrote (docs/formats/tsdb-wal.md, "chunks.sqlite"). The layout version is
// SQLite's user_version: 0 for files from before versioning, kChunkStoreLayout now.
#ifndef EXPANSE_TSDB_CHUNK_STORE_SCHEMA_H_
#define EXPANSE_TSDB_CHUNK_STORE_SCHEMA_H_

#include <string>

#include "core/result.h"

struct sqlite3;

namespace expanse::tsdb {

// 1: labels and batch windows. 2: the same tables; chunks may hold byte planes
// (tsdb-chunk.md, value width), which a layout-1 build would refuse as corrupt.
inline constexpr int kChunkStoreLayout = 2;

// Upgrading is one transaction that the caller holds, so a crash or a failing step leaves
// the file as it was: PrepareChunkStoreTables, then (when it returns true) the conversion of
// the layout-0 `batch_seqs` table, which it leaves to the chunk store, then
// RecordChunkStoreLayout.
//
// Creates the tables of a new file, or upgrades the series of a layout-0 file and adds the
// missing tables; returns whether `batch_seqs` still waits to be converted. A file from a
// newer build is refused (kFailedPrecondition, reason tsdb_layout): this build would misread
// it. Returns false with nothing to do for a file already at kChunkStoreLayout.
Result<bool> PrepareChunkStoreTables(sqlite3* db, const std::string& path);
// The file's layout; kFailedPrecondition (reason tsdb_layout) when it is newer than
// kChunkStoreLayout.
Result<int64_t> CheckChunkStoreLayout(sqlite3* db, const std::string& path);
// Sets user_version to kChunkStoreLayout.
Status RecordChunkStoreLayout(sqlite3* db, const std::string& path);

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_CHUNK_STORE_SCHEMA_H_
