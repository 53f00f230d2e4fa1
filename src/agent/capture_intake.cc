#include "agent/capture_intake.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "capture/capture_trigger.h"
#include "core/file_util.h"
#include "spool/hostile_read.h"
#include "spool/reasons.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"
#include "wire/trace_segment_header.h"

namespace expanse::agent {
namespace {

bool HasPrefix(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }

// The job a spool file's name claims: agg-<job>-… or seg-<job>-… (job ids hold no '-').
std::string JobOfName(const std::string& name) {
  const size_t start = name.find('-');
  const size_t end = start == std::string::npos ? start : name.find('-', start + 1);
  return end == std::string::npos ? "" : name.substr(start + 1, end - start - 1);
}

// Seconds since the inode last changed (which its owner cannot set back), or -1.
int64_t AgeSeconds(const std::string& path, int64_t now_ms) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0)
    return -1;
  return now_ms / 1000 - static_cast<int64_t>(st.st_ctime);
}
bool HasSuffix(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
}

// agg-<job>-….json or seg-<job>-….json: an agent's aggregate or segment, by its name.
bool IsAgentName(const std::string& name) {
  return (HasPrefix(name, "agg-") || HasPrefix(name, "seg-")) && HasSuffix(name, ".json");
}

}  // namespace

// The agents' files first, one from each job in turn (a job that floods the spool gets its
// share of a scan, never the others' turn): jobs running here, then names claiming any other
// job, then every other name, each group in name order.
std::vector<std::string> CaptureIntake::InTurnByJob(std::vector<std::string> sorted) const {
  std::map<std::string, std::deque<std::string>> by_job;
  std::vector<std::string> unknown_jobs, others;
  std::map<std::string, bool> running;  // claimed job -> runs here (asked once per scan)
  for (std::string& name : sorted) {
    if (!IsAgentName(name)) {
      others.push_back(std::move(name));
      continue;
    }
    const std::string job = JobOfName(name);
    auto known = running.find(job);
    if (known == running.end())
      known = running.emplace(job, !job.empty() && options_.job_uid && options_.job_uid(job)).first;
    if (known->second)
      by_job[job].push_back(std::move(name));
    else
      unknown_jobs.push_back(std::move(name));
  }
  std::vector<std::string> out;
  out.reserve(sorted.size());
  while (!by_job.empty()) {
    for (auto it = by_job.begin(); it != by_job.end();) {
      out.push_back(std::move(it->second.front()));
      it->second.pop_front();
      it = it->second.empty() ? by_job.erase(it) : std::next(it);
    }
  }
  for (std::vector<std::string>* rest : {&unknown_jobs, &others})
    std::move(rest->begin(), rest->end(), std::back_inserter(out));
  return out;
}

void CaptureIntake::Refuse(int spool_fd, const std::string& name, const std::string& reason,
                           const std::string& detail) {
  ++refused_[reason];
  problems_.push_back(name + ": " + reason + (detail.empty() ? "" : ": " + detail));
  if (problems_.size() > 10)
    problems_.erase(problems_.begin());
  Quarantine(spool_fd, name, reason);
}

// The quarantine's names, oldest first, read from the directory once.
void CaptureIntake::LoadQuarantine(const std::string& dir) {
  if (quarantine_loaded_)
    return;
  quarantine_loaded_ = true;
  Result<std::vector<std::string>> held = fs::ListDirectory(dir);
  if (!held.ok())
    return;
  std::vector<std::pair<int64_t, std::string>> by_age;
  for (const std::string& name : *held) {
    struct stat st {};
    if (lstat((dir + "/" + name).c_str(), &st) == 0)  // ctime: a job cannot set it back
      by_age.emplace_back(static_cast<int64_t>(st.st_ctime), name);
  }
  std::sort(by_age.begin(), by_age.end());
  for (auto& [changed, name] : by_age)
    quarantine_.push_back(std::move(name));
}

// Moves a refused file where an operator can look at it: the newest `max_quarantine_entries`
// of at most `max_quarantined_file_bytes` each are kept (the oldest go), so a job can neither
// fill the node's disk through it nor keep it full of its own files. Anything else is deleted;
// a directory only when empty. An entry that cannot be removed (a job's non-empty directory,
// which a daemon that is not root can neither empty nor move) is remembered, so later scans
// pass over it without counting it again.
void CaptureIntake::Quarantine(int spool_fd, const std::string& name, const std::string& reason) {
  const std::string dir = options_.control_dir + "/capture-quarantine";
  struct stat st {};
  if (fstatat(spool_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return;  // gone already
  // A symbolic link is kept as the link (renamed, never followed).
  if ((S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
      static_cast<uint64_t>(st.st_size) <= options_.max_quarantined_file_bytes &&
      options_.max_quarantine_entries > 0 && fs::MakeDirectories(dir, 0700).ok()) {
    LoadQuarantine(dir);
    const std::string kept = name + "." + reason;
    const std::string kept_path = dir + "/" + kept;
    if (renameat(spool_fd, name.c_str(), AT_FDCWD, kept_path.c_str()) == 0) {
      // The job may have swapped the entry since it was looked at: what arrived is held to
      // the same rules, or goes.
      struct stat moved {};
      if (lstat(kept_path.c_str(), &moved) != 0 ||
          !(S_ISREG(moved.st_mode) || S_ISLNK(moved.st_mode)) ||
          static_cast<uint64_t>(moved.st_size) > options_.max_quarantined_file_bytes) {
        if (unlinkat(AT_FDCWD, kept_path.c_str(), S_ISDIR(moved.st_mode) ? AT_REMOVEDIR : 0) != 0)
          problems_.push_back(kept_path +
                              ": a job's directory moved into the quarantine "
                              "could not be removed");
        return;
      }
      std::erase(quarantine_, kept);  // the same name again replaced the older copy
      quarantine_.push_back(kept);
      while (quarantine_.size() > options_.max_quarantine_entries) {
        unlink((dir + "/" + quarantine_.front()).c_str());
        quarantine_.pop_front();
      }
      return;
    }
  }
  if (unlinkat(spool_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0 &&
      errno != ENOENT && stuck_.size() < kMaxStuckEntries)
    stuck_[name] = st.st_ino;
}

// An entry refused before that could not be removed and is still the same: passed over.
bool CaptureIntake::StillStuck(int spool_fd, const std::string& name) {
  auto it = stuck_.find(name);
  if (it == stuck_.end())
    return false;
  struct stat st {};
  if (fstatat(spool_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == it->second &&
      !S_ISREG(st.st_mode))
    return true;
  stuck_.erase(it);  // gone or replaced: judged afresh
  return false;
}

CaptureScan CaptureIntake::Scan(int64_t now_ms) {
  CaptureScan scan;
  const std::string spool = options_.control_dir + "/capture";
  fs::UniqueFd spool_fd(open(spool.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!spool_fd.valid())
    return scan;
  Result<std::vector<std::string>> names =
      fs::ListDirectoryAt(spool_fd.get(), spool, options_.max_entries_listed);
  if (!names.ok())
    return scan;
  std::sort(names->begin(), names->end());
  for (auto it = stuck_.begin(); it != stuck_.end();)  // forget those no longer listed
    it = std::binary_search(names->begin(), names->end(), it->first) ? std::next(it)
                                                                     : stuck_.erase(it);
  const std::vector<std::string> ordered = InTurnByJob(std::move(*names));
  ready_bytes_.reset();  // counted again at the first segment of this scan
  std::string buffer;
  size_t examined = 0, files_read = 0, stuck_checks = 0;
  uint64_t bytes_read = 0;
  for (const std::string& name : ordered) {
    // Bounded work per scan, whatever a job leaves: the rest waits for the next one.
    if (examined >= options_.max_entries_per_scan)
      break;
    // An entry that could not be removed costs no turn; whether it is still the same is checked
    // for a bounded number of them per scan.
    if (stuck_.contains(name) &&
        (stuck_checks++ >= kStuckChecksPerScan || StillStuck(spool_fd.get(), name)))
      continue;
    const std::string path = spool + "/" + name;
    const bool aggregate = IsAgentName(name) && HasPrefix(name, "agg-");
    const bool segment = IsAgentName(name) && HasPrefix(name, "seg-");
    if ((aggregate || segment) &&
        (files_read >= options_.max_files_per_scan || bytes_read > options_.max_bytes_per_scan))
      continue;  // waits for the next scan; other names may still be handled in this one
    ++examined;
    const bool temporary = HasPrefix(name, ".");
    const bool log = HasPrefix(name, "agent-") && HasSuffix(name, ".log");
    if (temporary || log) {
      // An agent's temporary is renamed into place when complete; one a killed process left
      // goes once old. Agents' logs are kept a day for an operator. Ages are the inode's
      // change time, which a job cannot set back.
      const int64_t age = AgeSeconds(path, now_ms);
      if (age > (temporary ? options_.stale_temporary_ms / 1000 : 86'400))
        unlink(path.c_str());
      continue;
    }
    if (!aggregate && !segment) {
      Refuse(spool_fd.get(), name, "unknown_name", "");
      continue;
    }
    // Plain, single-linked, within its cap; never opened when a link, FIFO or device.
    spool::HostileReadLimits read_limits{
        .max_bytes = aggregate ? options_.max_aggregate_bytes : options_.max_segment_bytes,
        .any_owner = true};
    uid_t owner = 0;
    Result<std::string_view> bytes =
        spool::ReadHostileFile(spool_fd.get(), spool, name, read_limits, buffer, &owner);
    if (!bytes.ok()) {
      // Refused (its type, links, size, or a mode that keeps the daemon out) or vanished; an
      // I/O error leaves it for the next scan.
      if (bytes.status().code() == StatusCode::kDataLoss ||
          bytes.status().reason() == spool::reason::kPermissionDenied)
        Refuse(spool_fd.get(), name, bytes.status().reason(), bytes.status().message());
      continue;
    }
    ++files_read;
    const std::string_view content = *bytes;  // in `buffer`, until the next file is read
    bytes_read += content.size();
    // Only a user running the job the name claims may spool for it: checked before anything
    // is parsed, so no one else can make the daemon parse their files.
    const std::string claimed_job = JobOfName(name);
    const std::optional<uid_t> claimed_user =
        options_.job_uid && !claimed_job.empty() ? options_.job_uid(claimed_job) : std::nullopt;
    if (!claimed_user || *claimed_user != owner) {
      Refuse(spool_fd.get(), name, "not_the_jobs_user",
             "owner " + std::to_string(owner) + ", job " + claimed_job +
                 (claimed_user ? " of uid " + std::to_string(*claimed_user) : " unknown here"));
      continue;
    }
    Result<nlohmann::json> doc =
        wire::ParseJson(content, segment ? wire::TraceSegmentJsonLimits() : wire::JsonLimits{});
    if (!doc.ok()) {
      Refuse(spool_fd.get(), name, aggregate ? "bad_aggregate" : "bad_segment",
             doc.status().message());
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
        Refuse(spool_fd.get(), name, "bad_aggregate", record.status().message());
        continue;
      }
      job_id = record->job_id;
      host = record->host;
      uid = record->uid;
      scan.aggregates.push_back(std::move(*record));
    } else {
      Result<wire::TraceSegmentHeader> header =
          wire::DecodeTraceSegmentHeader(*doc, name, "bad_segment");
      if (!header.ok()) {
        Refuse(spool_fd.get(), name, "bad_segment", header.status().message());
        continue;
      }
      job_id = header->job_id;
      host = header->host;
      uid = header->uid;
      ready.pid = header->pid;
      ready.window_start_ms = header->window_start_ms;
      ready.window_end_ms = header->window_end_ms;
      ready.trigger_id = header->trigger_id;
      ready.job_id = job_id;
      ready.bytes = content.size();
    }
    if (host != options_.hostname) {
      if (aggregate)
        scan.aggregates.pop_back();
      Refuse(spool_fd.get(), name, "wrong_host", "names host " + host);
      continue;
    }
    if (static_cast<int64_t>(owner) != uid || job_id != claimed_job) {
      if (aggregate)
        scan.aggregates.pop_back();
      Refuse(spool_fd.get(), name, "wrong_owner",
             "owner " + std::to_string(owner) + ", says uid " + std::to_string(uid) + " and job " +
                 job_id);
      continue;
    }
    if (aggregate) {
      scan.aggregate_files.push_back(path);
      continue;
    }
    // Only a window the sampler asked this job for, a bounded number per trigger, and within
    // the job's share of the ready directory: a job can neither make evidence up unasked nor
    // push other jobs' segments out before they are uploaded.
    if (std::string detail, why = CheckTrigger(ready, &detail); !why.empty()) {
      Refuse(spool_fd.get(), name, why, detail);
      continue;
    }
    if (const uint64_t held = ReadyBytesOfJob(job_id);
        held + content.size() > options_.max_ready_segment_bytes_per_job) {
      Refuse(spool_fd.get(), name, "job_segment_quota",
             "job " + job_id + " has " + std::to_string(held) + " bytes of segments waiting");
      continue;
    }
    // The segment goes on as the bytes that were checked, in a file of the daemon's own under
    // its canonical name: nothing the job does to its spool entry afterwards reaches it.
    const std::string ready_name = "seg-" + job_id + "-" + host + "-" + std::to_string(ready.pid) +
                                   "-" + std::to_string(ready.window_start_ms) + ".json";
    ready.path = options_.segment_dir + "/" + ready_name;
    struct stat existing {};
    if (lstat(ready.path.c_str(), &existing) == 0) {
      ++refused_["duplicate_segment"];
      unlink(path.c_str());
      continue;
    }
    if (!fs::MakeDirectories(options_.segment_dir, 0700).ok() ||
        !fs::WriteFileAtomically(options_.segment_dir, ready_name, std::string(content), 0600).ok())
      continue;  // leave it for the next round
    unlink(path.c_str());
    if (segments_per_trigger_.size() >= kMaxTriggersKept)
      segments_per_trigger_.clear();
    ++segments_per_trigger_[job_id + " " + ready.trigger_id];
    (*ready_bytes_)[job_id] += content.size();  // counted by the quota check above
    scan.segments.push_back(std::move(ready));
  }
  BoundReadySegments();
  return scan;
}

void CaptureIntake::NoteTrigger(const std::string& job_id, const std::string& trigger_id,
                                int64_t until_ms) {
  if (issued_.size() >= kMaxTriggersKept && !issued_.contains(job_id))
    issued_.erase(issued_.begin());
  std::deque<std::pair<std::string, int64_t>>& triggers = issued_[job_id];
  triggers.emplace_back(trigger_id, until_ms);
  if (triggers.size() > kTriggersKeptPerJob)
    triggers.pop_front();
}

// "" when `segment` answers a trigger the sampler wrote for its job, inside that trigger's
// window, and its trigger has not had its share of segments; else the refusal's reason.
std::string CaptureIntake::CheckTrigger(const ReadySegment& segment, std::string* detail) const {
  std::optional<int64_t> until;
  if (auto it = issued_.find(segment.job_id); it != issued_.end()) {
    for (const auto& [id, until_ms] : it->second) {
      if (id == segment.trigger_id)
        until = until_ms;
    }
  }
  if (!until) {
    // Written before this daemon started: the job's trigger file, the daemon's own.
    std::string error;
    std::optional<capture::CaptureTrigger> latest =
        capture::ReadTrigger(options_.control_dir, segment.job_id, &error);
    if (latest && latest->id == segment.trigger_id)
      until = static_cast<int64_t>(latest->until_ms);
  }
  if (!until) {
    *detail = "trigger " + segment.trigger_id + " was not written for job " + segment.job_id;
    return "unknown_trigger";
  }
  // A window starts within the trigger's escalation window and ends by its deadline (the
  // agent cuts it there), with a minute of slack for the clocks of the processes.
  if (segment.window_start_ms < *until - wire::kMaxTraceSegmentWindowMs ||
      segment.window_start_ms > *until + 60'000) {
    *detail = "window from " + std::to_string(segment.window_start_ms) + " ms, trigger until " +
              std::to_string(*until) + " ms";
    return "outside_trigger_window";
  }
  if (auto it = segments_per_trigger_.find(segment.job_id + " " + segment.trigger_id);
      it != segments_per_trigger_.end() && it->second >= options_.max_segments_per_trigger) {
    *detail = std::to_string(it->second) + " segments taken for trigger " + segment.trigger_id;
    return "too_many_segments";
  }
  return "";
}

// Bytes of `job`'s segments waiting in the ready directory (names seg-<job>-…), from one
// listing per scan kept up to date as segments are taken.
uint64_t CaptureIntake::ReadyBytesOfJob(const std::string& job) {
  if (!ready_bytes_) {
    ready_bytes_.emplace();
    Result<std::vector<std::string>> names = fs::ListDirectory(options_.segment_dir);
    for (const std::string& name : names.ok() ? *names : std::vector<std::string>{}) {
      struct stat st {};
      if (HasPrefix(name, "seg-") && lstat((options_.segment_dir + "/" + name).c_str(), &st) == 0 &&
          S_ISREG(st.st_mode))
        (*ready_bytes_)[JobOfName(name)] += static_cast<uint64_t>(st.st_size);
    }
  }
  auto it = ready_bytes_->find(job);
  return it == ready_bytes_->end() ? 0 : it->second;
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
