#include "tsdb/batch_windows.h"

#include <sqlite3.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "core/result.h"
#include "tsdb/sqlite_statement.h"

namespace expanse::tsdb {
namespace {

// Receive times are the server's clock in seconds; beyond this they are damage (and
// `* 1000` would overflow long before int64 does).
constexpr int64_t kMaxReceivedS = 1'000'000'000'000;

// One row. Bit i of `members` (byte i / 8, least significant bit first) says whether
// sequence first + i was received; bit 0 always is.
struct Window {
  int64_t first = 0;
  std::string members;
  int64_t first_s = 0;  // oldest and newest receive time of the members
  int64_t last_s = 0;
  std::optional<int64_t> row_first;  // first_seq of its row (UPDATE), none yet (INSERT)
  bool dirty = false;
};

bool HasMember(const std::string& members, int64_t offset) {
  const auto byte = static_cast<size_t>(offset / 8);
  return byte < members.size() && (static_cast<uint8_t>(members[byte]) >> (offset % 8)) & 1;
}

void AddMember(std::string& members, int64_t offset) {
  const auto byte = static_cast<size_t>(offset / 8);
  if (members.size() <= byte)
    members.resize(byte + 1, '\0');
  members[byte] = static_cast<char>(static_cast<uint8_t>(members[byte]) | (1u << (offset % 8)));
}

// The offset of the last member; -1 for none.
int64_t LastMember(const std::string& members) {
  for (auto i = static_cast<int64_t>(members.size()) * 8 - 1; i >= 0; --i) {
    if (HasMember(members, i))
      return i;
  }
  return -1;
}

Status CheckWindow(int64_t stream_id, const Window& w) {
  // first <= kMaxBatchSeq first, so that adding an offset (< kBatchWindowSeqs) cannot overflow.
  const bool ok = w.first >= 0 && w.first <= kMaxBatchSeq &&
                  w.members.size() <= static_cast<size_t>(kBatchWindowSeqs / 8) &&
                  HasMember(w.members, 0) && w.first + LastMember(w.members) <= kMaxBatchSeq &&
                  w.first_s >= 0 && w.first_s <= w.last_s && w.last_s <= kMaxReceivedS;
  if (ok)
    return OkStatus();
  return DataLossError("tsdb chunk store: batch window " + std::to_string(w.first) + " of stream " +
                       std::to_string(stream_id) + " is damaged (" +
                       std::to_string(w.members.size()) + "-byte bitmap, received " +
                       std::to_string(w.first_s) + ".." + std::to_string(w.last_s) + ")")
      .WithReason("tsdb_corrupt");
}

// Adds r to w if it fits: its sequence inside w's window and its time within the span.
// True when r is (now or already) a member.
bool TryAdd(std::optional<Window>& w, const ReceivedSeq& r) {
  if (!w || r.seq < w->first || r.seq - w->first >= kBatchWindowSeqs)
    return false;
  const int64_t offset = r.seq - w->first;
  if (HasMember(w->members, offset)) {
    // Received again: the window must not be forgotten before this copy would be.
    if (r.received_s > w->last_s) {
      w->last_s = r.received_s;
      w->dirty = true;
    }
    return true;
  }
  const int64_t first_s = std::min(w->first_s, r.received_s);
  const int64_t last_s = std::max(w->last_s, r.received_s);
  if (last_s - first_s >= kBatchWindowSpanS)
    return false;
  AddMember(w->members, offset);
  w->first_s = first_s;
  w->last_s = last_s;
  w->dirty = true;
  return true;
}

// Moves w's start back to r.seq, if its members then still fit in one window and within the
// span: a sequence that arrives in a later Flush than those after it joins their window
// instead of starting one of its own. True when done.
bool TryPrepend(Window& w, const ReceivedSeq& r) {
  const int64_t shift = w.first - r.seq;
  if (shift <= 0 || shift + LastMember(w.members) >= kBatchWindowSeqs)
    return false;
  const int64_t first_s = std::min(w.first_s, r.received_s);
  const int64_t last_s = std::max(w.last_s, r.received_s);
  if (last_s - first_s >= kBatchWindowSpanS)
    return false;
  std::string members(1, '\x01');
  for (int64_t offset = LastMember(w.members); offset >= 0; --offset) {
    if (HasMember(w.members, offset))
      AddMember(members, offset + shift);
  }
  w.first = r.seq;
  w.members = std::move(members);
  w.first_s = first_s;
  w.last_s = last_s;
  w.dirty = true;
  return true;
}

}  // namespace

Status AddBatchSequences(sqlite3* db, int64_t stream_id, std::vector<ReceivedSeq> seqs) {
  Statement find(db,
                 "SELECT first_seq, members, first_s, last_s FROM batch_windows "
                 "WHERE stream_id = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1");
  Statement find_next(db,
                      "SELECT first_seq, members, first_s, last_s FROM batch_windows "
                      "WHERE stream_id = ? AND first_seq > ? ORDER BY first_seq LIMIT 1");
  Statement update(db,
                   "UPDATE batch_windows SET first_seq = ?, members = ?, first_s = ?, last_s = ? "
                   "WHERE stream_id = ? AND first_seq = ?");
  Statement insert(db,
                   "INSERT INTO batch_windows (stream_id, first_seq, members, first_s, last_s) "
                   "VALUES (?, ?, ?, ?, ?)");
  if (!find.ok() || !find_next.ok() || !update.ok() || !insert.ok())
    return SqlError(db, "prepare batch windows");
  std::optional<Window> w;
  auto save = [&]() -> Status {
    if (!w || !w->dirty)
      return OkStatus();
    Statement& statement = w->row_first ? update : insert;
    if (w->row_first) {
      update.Int(1, w->first);
      update.Blob(2, w->members);
      update.Int(3, w->first_s);
      update.Int(4, w->last_s);
      update.Int(5, stream_id);
      update.Int(6, *w->row_first);
    } else {
      insert.Int(1, stream_id);
      insert.Int(2, w->first);
      insert.Blob(3, w->members);
      insert.Int(4, w->first_s);
      insert.Int(5, w->last_s);
    }
    EXPANSE_RETURN_IF_ERROR(statement.Run("write batch window"));
    if (sqlite3_changes(db) != 1) {  // an UPDATE that missed its row would drop its bits
      return InternalError("tsdb chunk store: batch window " + std::to_string(w->first) +
                           " of stream " + std::to_string(stream_id) + " vanished");
    }
    w->row_first = w->first;
    w->dirty = false;
    return OkStatus();
  };
  // The window with the greatest first sequence at or before seq (`find`) or the one with the
  // least after it (`find_next`), if any.
  auto load = [&](Statement& query, int64_t seq) -> Status {
    w.reset();
    query.Int(1, stream_id);
    query.Int(2, seq);
    const int rc = query.Step();
    if (rc == SQLITE_ROW) {
      const int64_t first = query.ColumnInt(0);
      w = Window{first,          query.ColumnBlob(1), query.ColumnInt(2), query.ColumnInt(3), first,
                 /*dirty=*/false};
    }
    query.Reset();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      return SqlError(db, "read batch window");
    return w ? CheckWindow(stream_id, *w) : OkStatus();
  };

  for (ReceivedSeq& r : seqs)
    r.received_s = std::clamp<int64_t>(r.received_s, 0, kMaxReceivedS);
  std::sort(seqs.begin(), seqs.end(), [](const ReceivedSeq& a, const ReceivedSeq& b) {
    return std::pair(a.seq, a.received_s) < std::pair(b.seq, b.received_s);
  });
  for (const ReceivedSeq& r : seqs) {
    if (r.seq < 0 || r.seq > kMaxBatchSeq) {
      return InvalidArgumentError("tsdb chunk store: batch sequence " + std::to_string(r.seq) +
                                  " is out of range")
          .WithReason("tsdb_corrupt");
    }
    if (TryAdd(w, r))
      continue;
    // Not in the current window. The right one is the last at or before r.seq: a window
    // started later (when the span ran out) may begin inside the current one. Failing that,
    // the next one may move its start back to r.seq.
    EXPANSE_RETURN_IF_ERROR(save());
    EXPANSE_RETURN_IF_ERROR(load(find, r.seq));
    if (TryAdd(w, r))
      continue;
    EXPANSE_RETURN_IF_ERROR(load(find_next, r.seq));
    if (w && TryPrepend(*w, r))
      continue;
    // No window starts at r.seq (it would hold r.seq as its first member), so neither the
    // new row nor a moved one can collide.
    w = Window{r.seq,         std::string(1, '\x01'), r.received_s, r.received_s, std::nullopt,
               /*dirty=*/true};
  }
  return save();
}

Status ForEachBatchSequence(
    sqlite3* db,
    const std::function<Status(int64_t stream_id, int64_t seq, int64_t newest_s)>& visit) {
  Statement rows(db, "SELECT stream_id, first_seq, members, first_s, last_s FROM batch_windows");
  if (!rows.ok())
    return SqlError(db, "load batch windows");
  int rc;
  while ((rc = rows.Step()) == SQLITE_ROW) {
    const int64_t stream_id = rows.ColumnInt(0);
    const Window w{rows.ColumnInt(1), rows.ColumnBlob(2), rows.ColumnInt(3),
                   rows.ColumnInt(4), std::nullopt,       false};
    EXPANSE_RETURN_IF_ERROR(CheckWindow(stream_id, w));
    for (int64_t offset = 0; offset < static_cast<int64_t>(w.members.size()) * 8; ++offset) {
      if (HasMember(w.members, offset))
        EXPANSE_RETURN_IF_ERROR(visit(stream_id, w.first + offset, w.last_s));
    }
  }
  if (rc != SQLITE_DONE)
    return SqlError(db, "load batch windows");
  return OkStatus();
}

Status DeleteBatchWindowsBefore(sqlite3* db, int64_t cutoff_s) {
  Statement drop(db, "DELETE FROM batch_windows WHERE last_s < ?");
  if (!drop.ok())
    return SqlError(db, "prepare batch window retention");
  drop.Int(1, cutoff_s);
  return drop.Run("delete batch windows");
}

Status ConvertBatchSeqs(sqlite3* db) {
  {  // closed before the DROP, which an open reader of the table would block
    Statement rows(db, "SELECT stream_id, seq, received_s FROM batch_seqs ORDER BY stream_id, seq");
    if (!rows.ok())
      return SqlError(db, "read batch_seqs");
    std::optional<int64_t> stream_id;
    std::vector<ReceivedSeq> seqs;
    int rc;
    while ((rc = rows.Step()) == SQLITE_ROW) {
      if (stream_id && *stream_id != rows.ColumnInt(0)) {
        EXPANSE_RETURN_IF_ERROR(AddBatchSequences(db, *stream_id, std::move(seqs)));
        seqs.clear();
      }
      stream_id = rows.ColumnInt(0);
      seqs.push_back({rows.ColumnInt(1), rows.ColumnInt(2)});
    }
    if (rc != SQLITE_DONE)
      return SqlError(db, "read batch_seqs");
    if (stream_id)
      EXPANSE_RETURN_IF_ERROR(AddBatchSequences(db, *stream_id, std::move(seqs)));
  }
  Statement drop(db, "DROP TABLE batch_seqs");
  if (!drop.ok())
    return SqlError(db, "drop batch_seqs");
  return drop.Run("drop batch_seqs");
}

}  // namespace expanse::tsdb
