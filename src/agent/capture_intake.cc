#include "agent/capture_intake.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/file_util.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::agent {
namespace {

constexpr char kSegmentFormat[] = "expanse-trace-segment/1";

struct HostileFile {
  std::string bytes;
  uid_t owner = 0;
};

// Reads `path` as hostile input; on refusal returns nullopt with `reason` and `detail` set
// (reason "" when the file just vanished).
std::optional<HostileFile> ReadHostile(const std::string& path, uint64_t max_bytes,
                                       std::string* reason, std::string* detail) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return std::nullopt;
  }
  if (S_ISLNK(st.st_mode)) {
    *reason = "symlink";
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *reason = "not_regular";
    return std::nullopt;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      *reason = "unreadable";
      *detail = std::strerror(errno);
    }
    return std::nullopt;
  }
  HostileFile file;
  bool ok = fstat(fd, &st) == 0;
  if (!ok || !S_ISREG(st.st_mode)) {
    *reason = "not_regular";
  } else if (st.st_nlink != 1) {
    *reason = "hardlink";
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *reason = "too_large";
    *detail = std::to_string(st.st_size) + " bytes, at most " + std::to_string(max_bytes);
  } else {
    file.owner = st.st_uid;
    file.bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < file.bytes.size()) {
      const ssize_t n = read(fd, file.bytes.data() + got, file.bytes.size() - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += static_cast<size_t>(n);
    }
    if (got != file.bytes.size()) {
      *reason = "unreadable";
      *detail = "short read";
    }
  }
  close(fd);
  if (!reason->empty())
    return std::nullopt;
  return file;
}

bool HasPrefix(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }
bool HasSuffix(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
}

}  // namespace

void CaptureIntake::Refuse(const std::string& name, const std::string& reason,
                           const std::string& detail) {
  ++refused_[reason];
  problems_.push_back(name + ": " + reason + (detail.empty() ? "" : ": " + detail));
  if (problems_.size() > 10)
    problems_.erase(problems_.begin());
  Quarantine(name, reason);
}

// Moves a refused file where an operator can look at it, within a bound; else deletes it.
void CaptureIntake::Quarantine(const std::string& name, const std::string& reason) {
  const std::string from = options_.control_dir + "/capture/" + name;
  const std::string dir = options_.control_dir + "/capture-quarantine";
  if (fs::MakeDirectories(dir, 0700).ok()) {
    Result<std::vector<std::string>> held = fs::ListDirectory(dir);
    if (held.ok() && held->size() < options_.max_quarantine_entries &&
        rename(from.c_str(), (dir + "/" + name + "." + reason).c_str()) == 0)
      return;
  }
  unlink(from.c_str());
}

CaptureScan CaptureIntake::Scan(int64_t now_ms) {
  CaptureScan scan;
  const std::string spool = options_.control_dir + "/capture";
  Result<std::vector<std::string>> names = fs::ListDirectory(spool);
  if (!names.ok())
    return scan;
  std::sort(names->begin(), names->end());
  size_t seen = 0;
  for (const std::string& name : *names) {
    if (++seen > options_.max_files_per_scan)
      break;
    const std::string path = spool + "/" + name;
    if (HasPrefix(name, ".")) {
      // An agent's temporary: renamed into place when complete; one left by a killed process
      // goes once it is old.
      struct stat st {};
      if (lstat(path.c_str(), &st) == 0 &&
          static_cast<int64_t>(st.st_mtime) * 1000 + options_.stale_temporary_ms < now_ms)
        unlink(path.c_str());
      continue;
    }
    const bool aggregate = HasPrefix(name, "agg-") && HasSuffix(name, ".json");
    const bool segment = HasPrefix(name, "seg-") && HasSuffix(name, ".json");
    const bool log = HasPrefix(name, "agent-") && HasSuffix(name, ".log");
    if (log)
      continue;  // the agent's own notes; read by an operator, removed with their job's files
    if (!aggregate && !segment) {
      Refuse(name, "unknown_name", "");
      continue;
    }
    std::string reason, detail;
    std::optional<HostileFile> file =
        ReadHostile(path, aggregate ? options_.max_aggregate_bytes : options_.max_segment_bytes,
                    &reason, &detail);
    if (!file) {
      if (reason == "unreadable")
        continue;  // try again next round
      if (!reason.empty())
        Refuse(name, reason, detail);
      continue;
    }
    wire::JsonLimits limits;
    if (segment) {
      limits.max_values = 8'000'000;
      limits.max_string_bytes = 4096;
      limits.max_depth = 8;
    }
    Result<nlohmann::json> doc = wire::ParseJson(file->bytes, limits);
    if (!doc.ok()) {
      Refuse(name, aggregate ? "bad_aggregate" : "bad_segment", doc.status().message());
      continue;
    }
    // Who wrote it, for which job, on which host.
    std::string job_id, host;
    int64_t uid = -1;
    ReadySegment ready;
    if (aggregate) {
      Result<wire::CaptureAggregateRecord> record =
          wire::DecodeCaptureAggregate(*doc, name, "bad_aggregate");
      if (!record.ok()) {
        Refuse(name, "bad_aggregate", record.status().message());
        continue;
      }
      job_id = record->job_id;
      host = record->host;
      uid = record->uid;
      scan.aggregates.push_back(std::move(*record));
    } else {
      Result<wire::FieldReader> top = wire::FieldReader::Object(*doc, name, "bad_segment");
      Result<wire::FieldReader> other =
          top.ok() ? top->Member("otherData", wire::Need::kRequired) : top.status();
      Status header = other.ok() ? OkStatus() : other.status();
      if (header.ok() &&
          (top->Find("traceEvents") == nullptr || !top->Find("traceEvents")->is_array()))
        header = top->Bad("traceEvents", "must be an array");
      auto text = [&](const char* key, size_t max, std::string* out) {
        if (!header.ok())
          return;
        Result<std::string> v = other->Text(key, max, wire::Need::kRequired);
        header = v.ok() ? OkStatus() : v.status();
        if (v.ok())
          *out = *v;
      };
      auto integer = [&](const char* key, int64_t min, int64_t max, int64_t* out) {
        if (!header.ok())
          return;
        Result<int64_t> v = other->Int(key, min, max, wire::Need::kRequired);
        header = v.ok() ? OkStatus() : v.status();
        if (v.ok())
          *out = *v;
      };
      std::string format;
      text("format", 64, &format);
      if (header.ok() && format != kSegmentFormat)
        header = other->Bad("format", std::string("is not ") + kSegmentFormat);
      text("job_id", 64, &job_id);
      text("host", 253, &host);
      integer("pid", 1, int64_t{1} << 31, &ready.pid);
      integer("uid", 0, int64_t{1} << 32, &uid);
      integer("window_start_ms", 1, wire::kMaxTimeMs - 1, &ready.window_start_ms);
      integer("window_end_ms", ready.window_start_ms, ready.window_start_ms + 600'000,
              &ready.window_end_ms);
      if (header.ok()) {
        Result<wire::FieldReader> trigger = other->Member("trigger", wire::Need::kRequired);
        Result<std::string> id =
            trigger.ok() ? trigger->Text("id", 128, wire::Need::kRequired) : trigger.status();
        header = id.ok() ? OkStatus() : id.status();
        if (id.ok())
          ready.trigger_id = *id;
      }
      if (!header.ok()) {
        Refuse(name, "bad_segment", header.message());
        continue;
      }
      ready.job_id = job_id;
      ready.bytes = file->bytes.size();
    }
    if (host != options_.hostname) {
      if (aggregate)
        scan.aggregates.pop_back();
      Refuse(name, "wrong_host", "names host " + host);
      continue;
    }
    const std::optional<uid_t> job_user =
        options_.job_uid ? options_.job_uid(job_id) : std::nullopt;
    const char* who = nullptr;
    if (static_cast<int64_t>(file->owner) != uid)
      who = "wrong_owner";
    else if (!job_user || *job_user != file->owner)
      who = "not_the_jobs_user";
    if (who != nullptr) {
      if (aggregate)
        scan.aggregates.pop_back();
      Refuse(name, who,
             "owner " + std::to_string(file->owner) + ", says uid " + std::to_string(uid) +
                 ", job " + job_id +
                 (job_user ? " of uid " + std::to_string(*job_user) : " unknown here"));
      continue;
    }
    if (aggregate) {
      scan.aggregate_files.push_back(path);
      continue;
    }
    if (!fs::MakeDirectories(options_.segment_dir, 0700).ok())
      continue;  // leave it for the next round
    ready.path = options_.segment_dir + "/" + name;
    if (rename(path.c_str(), ready.path.c_str()) == 0)
      scan.segments.push_back(std::move(ready));
  }
  BoundReadySegments();
  return scan;
}

void CaptureIntake::Commit(const CaptureScan& scan) {
  for (const std::string& path : scan.aggregate_files)
    unlink(path.c_str());
}

// Oldest first (names carry the window start) until the ready segments fit their bound.
void CaptureIntake::BoundReadySegments() {
  Result<std::vector<std::string>> names = fs::ListDirectory(options_.segment_dir);
  if (!names.ok())
    return;
  std::vector<std::pair<int64_t, std::string>> by_age;
  uint64_t total = 0;
  for (const std::string& name : *names) {
    struct stat st {};
    const std::string path = options_.segment_dir + "/" + name;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    total += static_cast<uint64_t>(st.st_size);
    by_age.emplace_back(static_cast<int64_t>(st.st_mtime), path);
  }
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [mtime, path] : by_age) {
    if (total <= options_.max_ready_segment_bytes)
      break;
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && unlink(path.c_str()) == 0) {
      total -= static_cast<uint64_t>(st.st_size);
      ++segments_dropped_;
    }
  }
}

}  // namespace expanse::agent
