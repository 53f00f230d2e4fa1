// Internal to the tsdb module: which sequences of a batch stream the chunk store holds, as
// bitmaps over windows of consecutive sequences in its `batch_windows` table
// (docs/formats/tsdb-wal.md, "chunks.sqlite"). A sender's batches cost about a bit each,
// and the gaps that its other streams leave in its sequences a bit each too. All calls run
// inside the chunk store's transactions, on its connection.
#ifndef EXPANSE_TSDB_BATCH_WINDOWS_H_
#define EXPANSE_TSDB_BATCH_WINDOWS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"

struct sqlite3;

namespace expanse::tsdb {

// Sequences one row can hold: its bitmap is at most 512 bytes.
inline constexpr int64_t kBatchWindowSeqs = 4096;
// A window takes a new member only while its members' receive times stay within this span,
// so retention, which drops a window with its newest member, remembers no member much longer
// than it would one by one (unless a member is received again, see AddBatchSequences).
inline constexpr int64_t kBatchWindowSpanS = 3600;
// The largest sequence a batch id can carry (18 decimal digits).
inline constexpr int64_t kMaxBatchSeq = 999'999'999'999'999'999;

struct ReceivedSeq {
  int64_t seq = 0;  // 0..kMaxBatchSeq
  int64_t received_s = 0;
};

// Records sequences of one stream. A sequence already stored, received again (after memory
// forgot it), moves its window's newest time to the new receipt, whatever the span: its id
// must be remembered from then on, and its window neighbours are remembered as long. Receive
// times outside 0..1e12 s are clamped into it.
Status AddBatchSequences(sqlite3* db, int64_t stream_id, std::vector<ReceivedSeq> seqs);

// Every stored sequence with its window's newest receive time. A damaged row (a bitmap of
// the wrong size or without its first member, sequences or times out of range) is kDataLoss,
// reason tsdb_corrupt.
Status ForEachBatchSequence(
    sqlite3* db,
    const std::function<Status(int64_t stream_id, int64_t seq, int64_t newest_s)>& visit);

// Drops the windows whose newest member was received before cutoff_s.
Status DeleteBatchWindowsBefore(sqlite3* db, int64_t cutoff_s);

// Upgrade from layout 0: the rows of `batch_seqs(stream_id, seq, received_s)` become
// windows, and the table is dropped.
Status ConvertBatchSeqs(sqlite3* db);

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_BATCH_WINDOWS_H_
