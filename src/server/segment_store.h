// Where the server keeps the bytes of trace segments (docs/formats/segment-store.md). The list
// of segments, with their facts, is in the database (store::TraceSegmentRecord); the bytes are
// here, content-addressed under (compute id, SHA-256 of the bytes), so that the same segment
// delivered twice (a retry, or by both transports) is one file, and a name says what it holds.
//
// The default is a directory on the server's disk. Replicas of the server need a store they
// all reach: the same directory on a shared file system, or an S3-compatible bucket
// (s3_segment_store.h).
#ifndef EXPANSE_SERVER_SEGMENT_STORE_H_
#define EXPANSE_SERVER_SEGMENT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/result.h"
#include "core/status.h"
#include "store/job_store.h"

namespace expanse::server {

// "<compute id>/<first two hex digits>/<sha256>.json", the name of a segment in every store;
// kInvalidArgument for a compute id or hash that is not one.
Result<std::string> SegmentObjectName(std::string_view compute_id, std::string_view sha256);

class SegmentStore {
 public:
  virtual ~SegmentStore() = default;

  // Keeps `bytes` under (compute_id, sha256), the caller having computed sha256 from them.
  // Writing what is there already is harmless; readers never see a partial segment.
  virtual Status Put(std::string_view compute_id, std::string_view sha256,
                     std::string_view bytes) = 0;
  // The bytes, or nullopt when none are kept under that name.
  virtual Result<std::optional<std::string>> Get(std::string_view compute_id,
                                                 std::string_view sha256) = 0;
  // OK when nothing is kept under that name.
  virtual Status Remove(std::string_view compute_id, std::string_view sha256) = 0;
  // Tidies what crashes left (a directory store's stale temporaries) in at most
  // `max_directories` more of its directories, going on where the last call stopped; returns
  // how many leftovers went. Retention calls it each pass.
  virtual size_t SweepLeftovers(size_t /*max_directories*/) { return 0; }
};

// <dir>/<compute id>/<first two hex digits>/<sha256>.json, each written atomically (a
// temporary, fsync, rename), directories 0700 and files 0600: only the server reads them.
// A file read back must still hash to its name (a disk's or another writer's damage is
// kDataLoss "segment_bytes_changed", never served). A temporary a crash left behind is
// removed once it is kStaleTemporaryMs old (younger ones may be another request's write of
// the same segment in progress): when its segment is written again or removed, or by
// SweepLeftovers, which retention runs over every directory in turn.
//
// A new segment is refused (kResourceExhausted, reason "segment_store_full") when writing it
// would leave less free on the directory's file system than the larger of `keep_free_bytes`
// and 5 % of it: by default the directory is beside the SQLite file, and a disk the segments
// filled would stop the server storing telemetry, jobs and sign-ins.
class DirectorySegmentStore final : public SegmentStore {
 public:
  static constexpr int64_t kStaleTemporaryMs = 15 * 60 * 1000;
  static constexpr uint64_t kDefaultKeepFreeBytes = uint64_t{1} << 30;

  // Creates `dir` (0700) when missing. `clock` (wall time, compared with files' mtimes)
  // must outlive the store.
  static Result<std::unique_ptr<DirectorySegmentStore>> Open(
      std::string dir, Clock& clock, uint64_t keep_free_bytes = kDefaultKeepFreeBytes);

  Status Put(std::string_view compute_id, std::string_view sha256, std::string_view bytes) override;
  Result<std::optional<std::string>> Get(std::string_view compute_id,
                                         std::string_view sha256) override;
  Status Remove(std::string_view compute_id, std::string_view sha256) override;
  size_t SweepLeftovers(size_t max_directories) override;

 private:
  DirectorySegmentStore(std::string dir, Clock& clock, uint64_t keep_free_bytes)
      : dir_(std::move(dir)), clock_(clock), keep_free_bytes_(keep_free_bytes) {}
  // kResourceExhausted when `bytes` more would leave too little free (see the class comment).
  Status CheckRoomFor(size_t bytes) const;
  // The file of (compute_id, sha256); kInvalidArgument for a name that is not one.
  Result<std::string> PathOf(std::string_view compute_id, std::string_view sha256) const;
  // Removes the stale temporaries in `directory` of `name`, or of any file when `name` is
  // empty (see the class comment); returns how many went.
  size_t RemoveStaleTemporaries(const std::string& directory, const std::string& name);

  std::string dir_;
  Clock& clock_;
  uint64_t keep_free_bytes_;
  // SweepLeftovers' turn: the "<compute>/<xx>" directories still to look at this round.
  std::deque<std::string> sweep_queue_;
};

// Retention: forgets the segments received before `before_ms` and removes their bytes, at most
// `limit` per call; returns how many went. The bytes go first, each record only once its bytes
// are gone, so a crash in between leaves records the next call finishes, never bytes no record
// names.
Result<int64_t> ExpireSegments(store::JobStore& jobs, SegmentStore& segments, int64_t before_ms,
                               int limit);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_SEGMENT_STORE_H_
