// Internal to the tsdb module: the write-ahead log, an append-only file of framed
// records (docs/formats/tsdb-wal.md). Append returns only after fdatasync, so a record
// it acknowledged survives a crash; Write and Sync split it for group commit. Open replays the
// records; a torn or corrupt tail (a crash mid-write) is cut off with a log line, never treated as
// fatal. A damaged record followed by an intact one is skipped (logged, counted) so that the
// acknowledged records after it survive; a file whose magic is damaged is kept aside as
// <path>.corrupt-<n> and a new, empty log started.
#ifndef EXPANSE_TSDB_WAL_H_
#define EXPANSE_TSDB_WAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"

namespace expanse::tsdb {

inline constexpr char kWalMagic[8] = {'E', 'X', 'T', 'W', 'A', 'L', '0', '1'};
inline constexpr size_t kWalRecordHeaderSize = 8;  // u32 payload length, u32 crc32
inline constexpr uint32_t kMaxWalRecordBytes = 256u << 20;
// The file is extended with written zeros this far ahead of its last record, so that the
// fdatasync of an append does not also have to commit a new file size to the file
// system's journal (about half the cost of each sync on ext4).
inline constexpr uint64_t kWalPreallocateBytes = 8u << 20;

class Wal {
 public:
  using ReplayFn = std::function<Status(std::string_view payload)>;
  using LogFn = std::function<void(std::string_view line)>;

  // Opens or creates `path`, calls `replay` for every intact record in order and
  // truncates whatever follows the last one. A replay error aborts Open. Syncs the directory
  // too, so that a new file (also one started after setting a damaged one aside) is durable
  // under its name before Open returns.
  static Result<std::unique_ptr<Wal>> Open(const std::string& path, const ReplayFn& replay,
                                           const LogFn& log);
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Durable on OK: Write, then Sync. On failure the log ends where it did before.
  Status Append(std::string_view payload);
  // Appends one record without syncing it. Each record is written at the end of the last
  // whole one (pwrite at size()), so after a failed, partial write the next record overwrites
  // the partial one even when the file cannot be cut back. Not thread-safe against Write,
  // Append or Reset.
  Status Write(std::string_view payload);
  // fdatasync: every record written before the call is durable on OK. Safe to call
  // while another thread writes (the caller's records are already in the file), which
  // is what lets concurrent appends share one sync (group commit).
  Status Sync();
  // Empties the log (after its contents were persisted elsewhere).
  Status Reset();
  uint64_t size() const { return size_; }
  // Damaged records Open skipped because an intact record followed them.
  uint64_t skipped_records() const { return skipped_records_; }

 private:
  Wal(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size), allocated_(size) {}
  // Makes the file at least `end` bytes long with zeros after size_; best effort.
  void Preallocate(uint64_t end);

  std::string path_;
  int fd_;
  // Invariant: the last whole record ends at size_; the file ends at allocated_ and holds
  // only zeros between the two, except after a failed write that could not be cut back (the
  // next record overwrites it; replay cuts what is left of it as a torn tail).
  uint64_t size_;
  uint64_t allocated_;
  uint64_t skipped_records_ = 0;
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_WAL_H_
