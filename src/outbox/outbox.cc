#include "outbox/outbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/file_util.h"
#include "core/quote.h"
#include "outbox/file_io.h"
#include "outbox/outbox_format.h"

namespace expanse::outbox {
namespace {

constexpr char kDeadLetterFile[] = "dead-letter.log";
constexpr char kOldDeadLetterFile[] = "dead-letter.1.log";

Status CheckStream(std::string_view stream) {
  bool ok = !stream.empty() && stream.size() <= 32;
  for (char c : stream)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  if (ok)
    return OkStatus();
  return InvalidArgumentError("outbox: stream " + QuoteForMessage(stream) +
                              " must be 1 to 32 of [a-z0-9_-]")
      .WithReason("invalid_stream");
}

}  // namespace

Result<uint64_t> Outbox::Enqueue(std::string_view stream, const PayloadBuilder& build) {
  const EnqueueItem item{.stream = std::string(stream), .build = build};
  EXPANSE_ASSIGN_OR_RETURN(std::vector<uint64_t> sequences,
                           EnqueueGroup(std::span<const EnqueueItem>(&item, 1)));
  return sequences.front();
}

Result<std::vector<uint64_t>> Outbox::EnqueueGroup(std::span<const EnqueueItem> items) {
  std::lock_guard lock(mu_);
  if (items.empty())
    return std::vector<uint64_t>();
  const int64_t now_ms = clock_.NowMs();
  std::string frames;
  std::vector<uint64_t> frame_sizes;
  for (size_t i = 0; i < items.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(CheckStream(items[i].stream));
    const uint64_t sequence = next_sequence_ + i;
    EXPANSE_ASSIGN_OR_RETURN(Payload payload, items[i].build(sequence));
    if (payload.content_type.empty() || payload.content_type.size() > 255) {
      return InvalidArgumentError("outbox: a content type must be 1 to 255 bytes")
          .WithReason("invalid_payload");
    }
    if (payload.bytes.size() > kMaxPayloadBytes) {
      return InvalidArgumentError("outbox: a payload of " + std::to_string(payload.bytes.size()) +
                                  " bytes exceeds the " + std::to_string(kMaxPayloadBytes) +
                                  "-byte limit; split the batch")
          .WithReason("invalid_payload");
    }
    const std::string frame = EncodeFrame({.sequence = sequence,
                                           .enqueued_ms = now_ms,
                                           .stream = items[i].stream,
                                           .content_type = payload.content_type,
                                           .note = {},
                                           .payload = payload.bytes});
    frame_sizes.push_back(frame.size());
    frames += frame;
  }
  if (frames.size() + kSegmentHeaderSize > options_.max_bytes) {
    return ResourceExhaustedError("outbox: " + std::to_string(frames.size()) +
                                  " bytes of entries exceed the whole queue's bound of " +
                                  std::to_string(options_.max_bytes) + " bytes")
        .WithReason("outbox_entry_too_large");
  }

  const uint64_t segment_target = std::min(options_.segment_bytes, options_.max_bytes / 4);
  if (active_fd_ >= 0 && segments_[active_segment_].bytes + frames.size() > segment_target &&
      segments_[active_segment_].last_sequence != 0) {
    CloseActiveLocked();
  }
  EXPANSE_RETURN_IF_ERROR(MakeRoomLocked(frames.size()));
  const bool created = active_fd_ < 0;
  if (created)
    EXPANSE_RETURN_IF_ERROR(OpenActiveLocked(next_sequence_));
  Segment& segment = segments_[active_segment_];
  const std::string path = SegmentPath(active_segment_);

  // From here on the sequences are spent whatever happens: a failed write may still have
  // reached the disk, and a sequence that might be on disk is never handed out again.
  const uint64_t first = next_sequence_;
  next_sequence_ += items.size();
  Status status = !WriteRefused(SegmentFileName(active_segment_), frames.size()) &&
                          fs::WriteFully(active_fd_, frames)
                      ? OkStatus()
                      : IoError("write", path);
  if (status.ok())
    status = SyncFile(active_fd_, path);
  if (status.ok() && created)
    status = ToOutboxError(fs::SyncDirectory(options_.directory));
  if (!status.ok()) {
    // Undo what can be undone and leave this segment for good, so later entries never
    // follow a partial record. If the cut fails, replay cuts the partial record later.
    (void)::ftruncate(active_fd_, static_cast<off_t>(segment.bytes));
    const bool empty = segment.last_sequence == 0;
    const uint64_t abandoned = active_segment_;
    CloseActiveLocked();
    if (empty)
      (void)DeleteSegmentLocked(abandoned);
    return status;
  }

  std::vector<uint64_t> sequences;
  uint64_t offset = segment.bytes;
  for (size_t i = 0; i < items.size(); ++i) {
    entries_.push_back({.sequence = first + i,
                        .segment = active_segment_,
                        .offset = offset,
                        .frame_bytes = frame_sizes[i]});
    sequences.push_back(first + i);
    offset += frame_sizes[i];
  }
  segment.bytes = offset;
  segment.last_sequence = sequences.back();
  disk_bytes_ += frames.size();
  depth_bytes_ += frames.size();
  counters_.enqueued_entries += items.size();
  return sequences;
}

Status Outbox::MakeRoomLocked(uint64_t need) {
  uint64_t dropped_entries = 0, dropped_bytes = 0, dropped_segments = 0;
  Status status = OkStatus(), cursor = OkStatus();
  while (!segments_.empty()) {
    const uint64_t extra = need + (active_fd_ < 0 ? kSegmentHeaderSize : 0);
    if (disk_bytes_ + extra <= options_.max_bytes)
      break;
    const uint64_t oldest = segments_.begin()->first;
    // The cursor must hold next_sequence before the newest segment, whose name and records
    // otherwise keep it across a restart, can go. Older ones go without it.
    if (dropped_segments == 0)
      cursor = WriteCursorLocked();
    if (!cursor.ok() && oldest == segments_.rbegin()->first) {
      status = cursor;
      break;
    }
    if (active_fd_ >= 0 && oldest == active_segment_)
      CloseActiveLocked();  // the only segment: it goes too, and a new one is started
    while (!entries_.empty() && entries_.front().segment == oldest) {
      ++dropped_entries;
      dropped_bytes += entries_.front().frame_bytes;
      depth_bytes_ -= entries_.front().frame_bytes;
      entries_.pop_front();
    }
    ++dropped_segments;
    status = DeleteSegmentLocked(oldest);
    if (!status.ok())
      break;
  }
  if (dropped_segments > 0) {
    counters_.dropped_entries += dropped_entries;
    counters_.dropped_bytes += dropped_bytes;
    Log("outbox: full (" + std::to_string(options_.max_bytes) + " bytes); dropped the " +
        std::to_string(dropped_entries) + " oldest unacknowledged entries (" +
        std::to_string(dropped_bytes) + " bytes) to make room");
  }
  return status;
}

Status Outbox::OpenActiveLocked(uint64_t first_sequence) {
  const std::string path = SegmentPath(first_sequence);
  // O_TRUNC: a file of this name can only hold sequences never handed out (they would
  // have raised next_sequence_ at Open), such as a segment whose creation was cut short.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return IoError("create", path);
  if (WriteRefused(SegmentFileName(first_sequence), kSegmentHeaderSize) ||
      !fs::WriteFully(fd, std::string_view(kSegmentMagic, kSegmentHeaderSize))) {
    Status status = IoError("write", path);
    ::close(fd);
    ::unlink(path.c_str());
    return status;
  }
  active_fd_ = fd;
  active_segment_ = first_sequence;
  segments_[first_sequence] = {
      .first_sequence = first_sequence, .last_sequence = 0, .bytes = kSegmentHeaderSize};
  disk_bytes_ += kSegmentHeaderSize;
  return OkStatus();
}

void Outbox::CloseActiveLocked() {
  if (active_fd_ >= 0)
    ::close(active_fd_);
  active_fd_ = -1;
}

Status Outbox::DeleteSegmentLocked(uint64_t first_sequence) {
  auto it = segments_.find(first_sequence);
  if (it == segments_.end())
    return OkStatus();
  if (active_fd_ >= 0 && active_segment_ == first_sequence)
    CloseActiveLocked();
  const std::string path = SegmentPath(first_sequence);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return IoError("remove", path);
  disk_bytes_ -= it->second.bytes;
  segments_.erase(it);
  // The damaged tail replay kept (KeepCorruptTail) is of no use once its segment is gone.
  (void)::unlink((path + kCorruptSuffix).c_str());
  return OkStatus();
}

Status Outbox::DeleteDoneSegmentsLocked(const std::vector<uint64_t>& done, bool newest_may_go) {
  // Without a cursor holding next_sequence_, the newest segment's name and records are what
  // keep it across a restart; acknowledged entries in it may then be sent again, which the
  // server answers as duplicates.
  const uint64_t newest = segments_.empty() ? 0 : segments_.rbegin()->first;
  for (uint64_t first : done) {
    if (newest_may_go || first != newest)
      EXPANSE_RETURN_IF_ERROR(DeleteSegmentLocked(first));
  }
  return OkStatus();
}

Result<std::optional<OutboxEntry>> Outbox::Peek(uint64_t after) {
  std::lock_guard lock(mu_);
  while (true) {
    // entries_ is in sequence order.
    const auto next =
        std::upper_bound(entries_.begin(), entries_.end(), after,
                         [](uint64_t seq, const IndexEntry& e) { return seq < e.sequence; });
    if (next == entries_.end())
      break;
    const IndexEntry entry = *next;
    const std::string path = SegmentPath(entry.segment);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    std::string frame;
    Status read = DataLossError("outbox: " + path + " is gone");
    if (fd >= 0) {
      read = ReadAt(fd, entry.offset, entry.frame_bytes, path, &frame);
      ::close(fd);
    } else if (errno != ENOENT) {
      return IoError("open", path);
    }
    if (!read.ok() && read.code() != StatusCode::kDataLoss)
      return read;
    size_t frame_size = 0;
    if (read.ok() && CheckFrame(frame, &frame_size) == FrameCheck::kOk &&
        frame_size == entry.frame_bytes) {
      Result<Record> record = DecodeFrame(frame);
      if (record.ok() && record->sequence == entry.sequence) {
        return std::optional<OutboxEntry>(
            OutboxEntry{.sequence = record->sequence,
                        .stream = std::move(record->stream),
                        .content_type = std::move(record->content_type),
                        .enqueued_ms = record->enqueued_ms,
                        .payload = std::move(record->payload)});
      }
    }
    // It passed its checksum when written or replayed, so the disk changed under us. Skipping
    // it is all that can be done; it stays counted. Replay at the next Open agrees: it skips
    // a damaged record with a sound one after it, and the file stays as it is.
    Log("outbox: entry " + std::to_string(entry.sequence) + " in " + path +
        " is damaged on disk; skipping it");
    ++counters_.corrupt_entries;
    depth_bytes_ -= entry.frame_bytes;
    entries_.erase(next);
  }
  return std::optional<OutboxEntry>();
}

Status Outbox::Ack(uint64_t sequence) {
  std::lock_guard lock(mu_);
  return AckLocked(sequence);
}

Status Outbox::AckLocked(uint64_t sequence) {
  if (sequence >= next_sequence_) {
    return InvalidArgumentError("outbox: cannot acknowledge sequence " + std::to_string(sequence) +
                                ", which was never handed out (next is " +
                                std::to_string(next_sequence_) + ")");
  }
  if (sequence <= acked_through_ && !cursor_stale_)
    return OkStatus();
  acked_through_ = std::max(acked_through_, sequence);
  while (!entries_.empty() && entries_.front().sequence <= acked_through_) {
    depth_bytes_ -= entries_.front().frame_bytes;
    entries_.pop_front();
  }
  // A cursor that cannot be written (a full disk; WriteCursorLocked logs it) must not keep
  // the acknowledged segments: deleting them is what frees the disk. A restart before the next
  // successful write resends the acknowledged entries left on disk (duplicates to the server)
  // and neither loses nor reuses anything.
  const bool cursor_written = WriteCursorLocked().ok();
  // The segment being appended to stays (and is reused) until it is full; finished ones go
  // once nothing in them is left to send.
  std::vector<uint64_t> done;
  for (const auto& [first, segment] : segments_) {
    const bool active = active_fd_ >= 0 && first == active_segment_;
    if (!active && (entries_.empty() || segment.last_sequence < entries_.front().sequence))
      done.push_back(first);
  }
  return DeleteDoneSegmentsLocked(done, cursor_written);
}

Status Outbox::DeadLetter(const OutboxEntry& entry, std::string_view reason) {
  std::lock_guard lock(mu_);
  const std::string frame = EncodeFrame({.sequence = entry.sequence,
                                         .enqueued_ms = entry.enqueued_ms,
                                         .stream = entry.stream,
                                         .content_type = entry.content_type,
                                         .note = std::string(reason.substr(0, 65535)),
                                         .payload = entry.payload});
  const std::string path = options_.directory + "/" + kDeadLetterFile;
  struct stat info {};
  uint64_t size = ::stat(path.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
  if (size > 0 && size + frame.size() > options_.max_dead_letter_bytes) {
    const std::string old_path = options_.directory + "/" + kOldDeadLetterFile;
    if (::rename(path.c_str(), old_path.c_str()) != 0)
      return IoError("rename", path);
    size = 0;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return IoError("open", path);
  Status status = OkStatus();
  if (size == 0) {
    (void)::ftruncate(fd, 0);  // a header cut short by a crash would otherwise stay
    if (!fs::WriteFully(fd, std::string_view(kSegmentMagic, kSegmentHeaderSize)))
      status = IoError("write", path);
  }
  if (status.ok() && !fs::WriteFully(fd, frame))
    status = IoError("write", path);
  if (status.ok())
    status = SyncFile(fd, path);
  ::close(fd);
  if (status.ok() && size == 0)
    status = ToOutboxError(fs::SyncDirectory(options_.directory));
  // Even when the copy failed the entry is acknowledged: the server refused it for good, and
  // keeping it would block every entry behind it. The log line says what was lost.
  if (!status.ok()) {
    Log("outbox: could not keep refused entry " + std::to_string(entry.sequence) +
        " in the dead-letter file: " + status.ToString());
  }
  ++counters_.dead_lettered_entries;
  EXPANSE_RETURN_IF_ERROR(AckLocked(entry.sequence));
  return status;
}

OutboxStats Outbox::stats() {
  std::lock_guard lock(mu_);
  OutboxStats stats = counters_;
  stats.depth_entries = entries_.size();
  stats.depth_bytes = depth_bytes_;
  stats.disk_bytes = disk_bytes_;
  stats.next_sequence = next_sequence_;
  stats.acked_through = acked_through_;
  return stats;
}

}  // namespace expanse::outbox
