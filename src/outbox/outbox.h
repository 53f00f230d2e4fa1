// Outbox: the controller daemon's durable upload queue, on local disk
// (docs/formats/outbox.md).
//
//   EXPANSE_ASSIGN_OR_RETURN(auto box, outbox::Outbox::Open(options, clock));
//   EXPANSE_ASSIGN_OR_RETURN(uint64_t sequence, box->Enqueue("telemetry", [&](uint64_t seq) {
//     return outbox::ZstdJsonPayload(BatchJson(seq));   // the sequence goes into the batch
//   }));
//   // the uploader: Peek, send, Ack (or DeadLetter), repeat
//
// Guarantees:
// - Enqueue returns only once the entry is on disk (fdatasync; the directory too when a new
//   segment file was made). An entry it acknowledged survives kill -9 and power loss until
//   it is acknowledged by Ack, dead-lettered, or dropped to honour the size bound.
// - Each entry gets a sequence at enqueue time, stored with it; sequences increase and are
//   never handed out twice, also across restarts and after the queue emptied (the cursor file
//   remembers the next one). A fresh outbox starts at the clock's Unix ms times 1000, so even
//   a reinstalled daemon whose outbox was lost does not reuse a sequence the server has seen
//   (unless it enqueued over 1000 batches a millisecond). Sequences are shared by all streams;
//   the gaps this leaves within one stream are harmless (the server only needs them unique).
// - Peek returns only durable entries, oldest first. A crash between sending an entry and
//   Ack sends the same entry (same sequence, same bytes) again after the restart; the server
//   recognises it (`"duplicate": true`).
// - The segment files together stay within max_bytes: to make room, whole segments are
//   dropped oldest first, acknowledged or not, and their unacknowledged entries counted.
//
// Thread-safe; one mutex serialises everything, including the syncs (enqueues come every few
// seconds, so there is nothing to gain from finer locking). One process per directory: Open
// takes an exclusive flock on <directory>/lock.
#ifndef EXPANSE_OUTBOX_OUTBOX_H_
#define EXPANSE_OUTBOX_OUTBOX_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "outbox/payload.h"

namespace expanse::outbox {

struct OutboxOptions {
  // Created (0700) when missing. Must be on local disk (see allow_network_filesystem).
  std::string directory{};
  // Bound on the segment files' total size. 2 GiB holds many hours of a large cluster's
  // telemetry, so a long outage of the server is backfilled rather than lost.
  uint64_t max_bytes = uint64_t{2} << 30;
  // A segment is closed and a new one started once it would grow past this (or past a quarter
  // of max_bytes, whichever is smaller), so dropping and deleting free space in small steps.
  uint64_t segment_bytes = uint64_t{64} << 20;
  // The dead-letter file is moved to dead-letter.1.log (replacing it) past this size.
  uint64_t max_dead_letter_bytes = uint64_t{64} << 20;
  // Off: Open refuses NFS, Lustre, GPFS and other network file systems (file_io.h).
  bool allow_network_filesystem = false;
  // Operator-facing lines (a cut torn tail, dropped entries). Default: stderr.
  std::function<void(std::string_view)> log = nullptr;
  // Tests only: a disk that fills up. Asked before each write to a segment or the cursor with
  // the file's name and the bytes the write adds to the disk (0 for the cursor's overwrite in
  // place); a nonzero errno (ENOSPC) fails that write as the kernel would. Default: none.
  std::function<int(std::string_view name, uint64_t new_bytes)> write_error = nullptr;
};

struct OutboxEntry {
  uint64_t sequence = 0;
  std::string stream{};
  std::string content_type{};
  int64_t enqueued_ms = 0;
  std::string payload{};
};

struct EnqueueItem {
  std::string stream{};  // the ingest rule: 1 to 32 of [a-z0-9_-]
  PayloadBuilder build{};
};

struct OutboxStats {
  uint64_t depth_entries = 0;  // not yet acknowledged
  uint64_t depth_bytes = 0;    // their framed size
  uint64_t disk_bytes = 0;     // segment files, headers and acknowledged entries included
  uint64_t next_sequence = 0;
  uint64_t acked_through = 0;
  // Since Open:
  uint64_t enqueued_entries = 0;
  uint64_t dropped_entries = 0;  // unacknowledged entries dropped to honour max_bytes
  uint64_t dropped_bytes = 0;
  uint64_t dead_lettered_entries = 0;
  uint64_t corrupt_entries = 0;  // records found damaged (at Open or Peek) and skipped
  uint64_t corrupt_bytes = 0;    // bytes of damaged records skipped, or of tails cut, at Open
  uint64_t cursor_failures = 0;  // acknowledgements the cursor file could not record
};

class Outbox {
 public:
  // Creates or reopens the queue: replays every segment, skips a damaged record that a sound
  // one follows, cuts a torn or corrupt tail (a crash mid-write) with a log line, deletes fully
  // acknowledged segments. A cursor that cannot be written (a full disk) does not fail it. Fails
  // with kFailedPrecondition "outbox_locked" when another process holds the directory,
  // "outbox_on_network_filesystem" for a shared mount; kInvalidArgument for unusable options.
  static Result<std::unique_ptr<Outbox>> Open(OutboxOptions options, Clock& clock);
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Appends one entry, durable on return; returns its sequence.
  Result<uint64_t> Enqueue(std::string_view stream, const PayloadBuilder& build);
  // Appends entries in order with a single sync; all or none are durable on return. Their
  // sequences are consecutive. kInvalidArgument for a bad stream name or a payload over
  // kMaxPayloadBytes; kResourceExhausted ("outbox_entry_too_large") for a group larger than
  // max_bytes itself; a builder's error as it is.
  Result<std::vector<uint64_t>> EnqueueGroup(std::span<const EnqueueItem> items);

  // The oldest unacknowledged entry after sequence `after` (0: the oldest of all), read back
  // from disk and checked; nullopt when there is none.
  Result<std::optional<OutboxEntry>> Peek(uint64_t after = 0);
  // Acknowledges every entry up to and including `sequence` and records that durably (the
  // cursor file is replaced atomically, or overwritten in place when the disk is full), then
  // deletes segments left without live entries. When the cursor cannot be written at all, the
  // acknowledgement holds in memory, is logged and counted (cursor_failures), and the cursor is
  // retried at the next Ack; segments still go, except the newest (docs/formats/outbox.md).
  // Acknowledging an entry that was dropped meanwhile, or twice, is fine. kInvalidArgument for
  // a sequence never handed out.
  Status Ack(uint64_t sequence);
  // Moves an entry the server refused for good (a 4xx other than auth) to the dead-letter file
  // with `reason`, then acknowledges it, so one poison batch cannot block the queue.
  Status DeadLetter(const OutboxEntry& entry, std::string_view reason);

  OutboxStats stats();
  const OutboxOptions& options() const { return options_; }

 private:
  struct Segment {
    uint64_t first_sequence = 0;
    uint64_t last_sequence = 0;  // 0 while it holds no entry
    uint64_t bytes = 0;          // file size; every byte belongs to a whole record
  };
  struct IndexEntry {
    uint64_t sequence = 0;
    uint64_t segment = 0;  // first_sequence of its segment
    uint64_t offset = 0;
    uint64_t frame_bytes = 0;
  };

  Outbox(OutboxOptions options, Clock& clock);
  Status Load();
  Status ReplaySegment(uint64_t first_sequence, bool last, uint64_t* max_sequence);
  Status AckLocked(uint64_t sequence);
  Status WriteCursorLocked();
  Status OverwriteCursorLocked(const std::string& bytes);
  bool WriteRefused(std::string_view name, uint64_t new_bytes) const;
  Status MakeRoomLocked(uint64_t need);
  Status DeleteSegmentLocked(uint64_t first_sequence);
  Status DeleteDoneSegmentsLocked(const std::vector<uint64_t>& done, bool newest_may_go);
  void KeepCorruptTail(int fd, const std::string& path, uint64_t offset, uint64_t size);
  void CloseActiveLocked();
  Status OpenActiveLocked(uint64_t first_sequence);
  std::string SegmentPath(uint64_t first_sequence) const;
  void Log(const std::string& line) const;

  const OutboxOptions options_;
  Clock& clock_;
  int lock_fd_ = -1;
  std::mutex mu_;
  std::map<uint64_t, Segment> segments_;  // by first_sequence
  std::deque<IndexEntry> entries_;        // unacknowledged, oldest first
  int active_fd_ = -1;                    // the segment being appended to, if any
  uint64_t active_segment_ = 0;           // its first_sequence; valid when active_fd_ >= 0
  uint64_t next_sequence_ = 0;
  uint64_t acked_through_ = 0;
  bool cursor_stale_ = false;  // the cursor file lags acked_through_ (it could not be written)
  uint64_t disk_bytes_ = 0;    // Invariant: the sum of segments_[*].bytes
  uint64_t depth_bytes_ = 0;   // Invariant: the sum of entries_[*].frame_bytes
  OutboxStats counters_;       // the "since Open" fields
};

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_OUTBOX_H_
