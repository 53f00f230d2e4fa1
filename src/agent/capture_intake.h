// CaptureIntake: the sampler's reading of the node-local capture spool (<control>/capture,
// docs/formats/capture-spool.md). Every file there was written by a job's process as the job's
// user, so everything is hostile input:
//   - only plain, single-linked files, opened without following links or blocking, no larger
//     than their kind's cap, are read;
//   - a file must be owned by the account it says wrote it, that account must be the user of
//     the job it names (`job_uid`), and it must name this host: no job can speak for another;
//   - aggregates are decoded with wire::DecodeCaptureAggregate; a trace segment must parse as
//     JSON within limits and carry the segment header (otherData) of this format.
// A refused file is moved to <control>/capture-quarantine (the newest 200 of up to 1 MiB each;
// anything else is deleted) and counted with its reason. Work per scan is bounded: entries
// listed, entries handled, files and bytes read; the agents' own names go first. Accepted
// aggregates are deleted by Commit once the caller has handed them on; accepted segments are moved
// into `segment_dir` (bounded by bytes, oldest dropped and counted), where the upload takes them
// (segments are dropped before telemetry). An agent's temporary file left by a killed process is
// removed once it is old.
#ifndef EXPANSE_AGENT_CAPTURE_INTAKE_H_
#define EXPANSE_AGENT_CAPTURE_INTAKE_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wire/capture_records.h"

namespace expanse::agent {

struct CaptureIntakeOptions {
  std::string control_dir;
  std::string hostname;
  std::string segment_dir;  // node-local, the daemon account's
  // The user (uid) of a job running, or recently run, on this node; nullopt when unknown.
  std::function<std::optional<uid_t>(const std::string& job_id)> job_uid;
  uint64_t max_aggregate_bytes = 256 << 10;
  uint64_t max_segment_bytes = 64 << 20;
  uint64_t max_ready_segment_bytes = 1ull << 30;
  uint64_t max_ready_segment_bytes_per_job = 256ull << 20;  // a job's share of the above
  uint32_t max_segments_per_trigger = 64;  // a job's processes answering one trigger
  size_t max_files_per_scan = 2000;        // aggregates and segments read
  uint64_t max_bytes_per_scan = 256ull << 20;
  // Entries of any kind handled per scan, and listed per scan (a job can make millions).
  size_t max_entries_per_scan = 20'000;
  size_t max_entries_listed = 200'000;
  uint32_t max_quarantine_entries = 200;
  uint64_t max_quarantined_file_bytes = 1 << 20;  // a larger refused file is deleted
  int64_t stale_temporary_ms = 10 * 60 * 1000;
};

struct ReadySegment {
  std::string path;  // in segment_dir
  std::string job_id;
  int64_t pid = 0;
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;
  std::string trigger_id;
  uint64_t bytes = 0;
};

struct CaptureScan {
  std::vector<wire::CaptureAggregateRecord> aggregates;
  std::vector<std::string> aggregate_files;  // deleted by Commit
  std::vector<ReadySegment> segments;        // moved into segment_dir
};

class CaptureIntake {
 public:
  explicit CaptureIntake(CaptureIntakeOptions options) : options_(std::move(options)) {}

  // A Phase B trigger the sampler wrote for `job_id` (phase_b_triggers.h): segments must
  // answer one, within its window. Triggers written before a restart are found in the job's
  // trigger file (its latest only).
  void NoteTrigger(const std::string& job_id, const std::string& trigger_id, int64_t until_ms);

  CaptureScan Scan(int64_t now_ms);
  // The scan's aggregates were handed on: their files go.
  void Commit(const CaptureScan& scan);

  // Refusals so far by reason ("symlink", "too_large", "wrong_owner", "not_the_jobs_user",
  // "wrong_host", "bad_aggregate", "bad_segment", "duplicate_segment", …), and segments
  // dropped for space.
  const std::map<std::string, uint64_t>& refused() const { return refused_; }
  uint64_t segments_dropped() const { return segments_dropped_; }
  // The latest refusals, "<file>: <reason>: <detail>", at most 10.
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  void Refuse(int spool_fd, const std::string& name, const std::string& reason,
              const std::string& detail);
  void Quarantine(int spool_fd, const std::string& name, const std::string& reason);
  void LoadQuarantine(const std::string& dir);
  bool StillStuck(int spool_fd, const std::string& name);
  void BoundReadySegments();
  std::string CheckTrigger(const ReadySegment& segment, std::string* detail) const;
  uint64_t ReadyBytesOfJob(const std::string& job);
  std::vector<std::string> InTurnByJob(std::vector<std::string> sorted) const;

  CaptureIntakeOptions options_;
  std::map<std::string, uint64_t> refused_;
  uint64_t segments_dropped_ = 0;
  std::vector<std::string> problems_;
  std::deque<std::string> quarantine_;  // its names, oldest first
  bool quarantine_loaded_ = false;
  // Refused entries that could not be removed, by name, with their inode.
  static constexpr size_t kMaxStuckEntries = 100'000;
  static constexpr size_t kStuckChecksPerScan = 1'000;
  // Bytes of each job's segments in the ready directory, during a scan.
  std::optional<std::map<std::string, uint64_t>> ready_bytes_;
  std::map<std::string, ino_t> stuck_;
  // Triggers written, by job (the latest few), and segments taken per "<job> <trigger id>".
  static constexpr size_t kMaxTriggersKept = 10'000;
  static constexpr size_t kTriggersKeptPerJob = 16;
  std::map<std::string, std::deque<std::pair<std::string, int64_t>>> issued_;
  std::map<std::string, uint32_t> segments_per_trigger_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_CAPTURE_INTAKE_H_
