#include "agent/segment_relay.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "wire/trace_segment_header.h"

namespace expanse::agent {

std::vector<SegmentFileEntry> ListSegmentFiles(const std::string& dir) {
  std::vector<SegmentFileEntry> out;
  Result<std::vector<std::string>> names = fs::ListDirectory(dir);
  if (!names.ok())
    return out;
  for (const std::string& name : *names) {
    if (name.rfind("seg-", 0) != 0 || name.size() < 5 || name.substr(name.size() - 5) != ".json")
      continue;
    struct stat st {};
    if (lstat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    out.push_back({name, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                   static_cast<uint64_t>(st.st_size)});
  }
  std::sort(out.begin(), out.end(), [](const SegmentFileEntry& a, const SegmentFileEntry& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });
  return out;
}

std::string SegmentRelayRoot(const std::string& shared_prefix) {
  return shared_prefix + "/spool/segments";
}

void SegmentRelay::Flush() {
  std::vector<SegmentFileEntry> ready = ListSegmentFiles(options_.ready_dir);
  if (ready.empty())
    return;
  if (Status s = fs::MakeDirectories(options_.relay_dir, 0750); !s.ok()) {
    ++stats_.failed;
    stats_.last_problem = s.message();
    return;
  }
  uint64_t relayed_bytes = 0;
  for (const SegmentFileEntry& e : ListSegmentFiles(options_.relay_dir))
    relayed_bytes += e.bytes;
  size_t moved = 0;
  for (const SegmentFileEntry& e : ready) {
    if (moved >= options_.max_files_per_flush)
      return;
    struct statvfs vfs {};
    const bool room = relayed_bytes + e.bytes <= options_.max_relay_bytes &&
                      statvfs(options_.relay_dir.c_str(), &vfs) == 0 &&
                      uint64_t{vfs.f_bavail} * vfs.f_frsize >= options_.min_free_bytes + e.bytes;
    if (!room) {
      ++stats_.held_for_space;
      stats_.last_problem = "segments wait in " + options_.ready_dir +
                            ": the shared spool's relay directory is full or the file system "
                            "short of space";
      return;
    }
    Status s = fs::CopyFileAtomically(options_.ready_dir + "/" + e.name, options_.relay_dir, e.name,
                                      wire::kMaxTraceSegmentBytes, 0640, static_cast<uid_t>(-1),
                                      static_cast<gid_t>(-1));
    if (!s.ok()) {
      ++stats_.failed;
      stats_.last_problem = s.message();
      return;
    }
    unlink((options_.ready_dir + "/" + e.name).c_str());
    relayed_bytes += e.bytes;
    ++stats_.relayed;
    ++moved;
  }
}

}  // namespace expanse::agent
