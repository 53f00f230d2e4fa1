#include "server/segment_store.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "crypto/hash.h"
#include "wire/trace_segment_header.h"

namespace expanse::server {
namespace {

// Compute ids are the server's own (cmp_…); anything else is refused before it names a path.
bool IsSafeName(std::string_view s, size_t max_bytes) {
  if (s.empty() || s.size() > max_bytes)
    return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64)
    return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<DirectorySegmentStore>> DirectorySegmentStore::Open(
    std::string dir, Clock& clock, uint64_t keep_free_bytes) {
  if (dir.empty())
    return InvalidArgumentError("the segment directory is empty");
  if (Status s = fs::MakeDirectories(dir, 0700); !s.ok())
    return Status(s.code(), "segment directory: " + s.message());
  return std::unique_ptr<DirectorySegmentStore>(
      new DirectorySegmentStore(std::move(dir), clock, keep_free_bytes));
}

Result<std::string> SegmentObjectName(std::string_view compute_id, std::string_view sha256) {
  if (!IsSafeName(compute_id, 64))
    return InvalidArgumentError("segment store: the compute id is not a name");
  if (!IsSha256Hex(sha256))
    return InvalidArgumentError("segment store: sha256 must be 64 lowercase hex digits");
  return std::string(compute_id) + "/" + std::string(sha256.substr(0, 2)) + "/" +
         std::string(sha256) + ".json";
}

Result<std::string> DirectorySegmentStore::PathOf(std::string_view compute_id,
                                                  std::string_view sha256) const {
  EXPANSE_ASSIGN_OR_RETURN(const std::string name, SegmentObjectName(compute_id, sha256));
  return dir_ + "/" + name;
}

size_t DirectorySegmentStore::RemoveStaleTemporaries(const std::string& directory,
                                                     const std::string& name) {
  // WriteFileAtomically's temporaries: ".<name>.tmp.XXXXXX" beside the file.
  const std::string prefix = "." + name;
  Result<std::vector<std::string>> entries = fs::ListDirectory(directory);
  if (!entries.ok())
    return 0;  // nothing to tidy, or the write that follows says why
  const int64_t now_ms = clock_.NowMs();
  size_t removed = 0;
  for (const std::string& entry : *entries) {
    const size_t tmp = entry.find(".tmp.", prefix.size());
    if (entry.rfind(prefix, 0) != 0 || tmp == std::string::npos ||
        (!name.empty() && tmp != prefix.size()))
      continue;
    const std::string path = directory + "/" + entry;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    const int64_t mtime_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (now_ms - mtime_ms >= kStaleTemporaryMs && unlink(path.c_str()) == 0)
      ++removed;
  }
  return removed;
}

size_t DirectorySegmentStore::SweepLeftovers(size_t max_directories) {
  if (sweep_queue_.empty()) {  // a new round: every compute's shard directories
    Result<std::vector<std::string>> computes = fs::ListDirectory(dir_);
    for (const std::string& compute : computes.ok() ? *computes : std::vector<std::string>()) {
      Result<std::vector<std::string>> shards = fs::ListDirectory(dir_ + "/" + compute);
      for (const std::string& shard : shards.ok() ? *shards : std::vector<std::string>())
        sweep_queue_.push_back(compute + "/" + shard);
    }
  }
  size_t removed = 0;
  for (size_t n = 0; n < max_directories && !sweep_queue_.empty(); ++n) {
    removed += RemoveStaleTemporaries(dir_ + "/" + sweep_queue_.front(), "");
    sweep_queue_.pop_front();
  }
  return removed;
}

Status DirectorySegmentStore::CheckRoomFor(size_t bytes) const {
  struct statvfs fs_stat {};
  if (statvfs(dir_.c_str(), &fs_stat) != 0)
    return fs::ErrnoStatus(errno, "statvfs " + dir_);
  const uint64_t total = uint64_t{fs_stat.f_blocks} * fs_stat.f_frsize;
  const uint64_t free = uint64_t{fs_stat.f_bavail} * fs_stat.f_frsize;
  const uint64_t keep = std::max(keep_free_bytes_, total / 20);
  if (free >= keep && free - keep >= bytes)
    return OkStatus();
  return ResourceExhaustedError("segment store: " + dir_ + " has " + std::to_string(free >> 20) +
                                " MiB free, and keeps " + std::to_string(keep >> 20) +
                                " MiB free for the server's database")
      .WithReason("segment_store_full");
}

Status DirectorySegmentStore::Put(std::string_view compute_id, std::string_view sha256,
                                  std::string_view bytes) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string path, PathOf(compute_id, sha256));
  const auto [directory, name] = fs::SplitPath(path);
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(directory, 0700));
  // A write a crash cut short is sent again by the daemon (it retries until answered).
  RemoveStaleTemporaries(directory, name);
  // The name is the content's hash: a file there already holds these bytes (it was renamed
  // into place whole), so a repeat writes nothing.
  if (access(path.c_str(), F_OK) == 0)
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(CheckRoomFor(bytes.size()));
  return fs::WriteFileAtomically(directory, name, std::string(bytes), 0600);
}

Result<std::optional<std::string>> DirectorySegmentStore::Get(std::string_view compute_id,
                                                              std::string_view sha256) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string path, PathOf(compute_id, sha256));
  EXPANSE_ASSIGN_OR_RETURN(
      std::optional<std::string> bytes,
      fs::ReadSmallFile(path, wire::kMaxTraceSegmentBytes, fs::Symlinks::kRefuse));
  // A disk's damage, or whoever else can write the directory, must not be served as the
  // segment its name promises.
  if (bytes && crypto::Sha256Hex(*bytes) != sha256)
    return DataLossError("segment store: " + path + " does not hold the bytes its name hashes")
        .WithReason("segment_bytes_changed");
  return bytes;
}

Status DirectorySegmentStore::Remove(std::string_view compute_id, std::string_view sha256) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string path, PathOf(compute_id, sha256));
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    return fs::ErrnoStatus(errno, "remove " + path);
  const auto [directory, name] = fs::SplitPath(path);
  RemoveStaleTemporaries(directory, name);
  return OkStatus();
}

Result<int64_t> ExpireSegments(store::JobStore& jobs, SegmentStore& segments, int64_t before_ms,
                               int limit) {
  EXPANSE_ASSIGN_OR_RETURN(
      const std::vector<store::TraceSegmentRecord> expired,
      jobs.ExpireTraceSegments(before_ms, limit, [&](const store::TraceSegmentRecord& s) {
        return segments.Remove(s.compute_id, s.sha256);
      }));
  return static_cast<int64_t>(expired.size());
}

}  // namespace expanse::server
