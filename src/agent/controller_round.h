// One flush round of the controller (controller_role.h): this host's collection and SLURM's
// jobs into one outbox batch, then the workers' spool file by file, then what the heartbeat
// reports. Apart from the role's threads so that a round runs as a unit test: the commands it
// runs (squeue, sacct), the files it reads outside the spool (gres.conf), the environment it
// consults and its clock all go through a Host (core/host.h). The outbox and the spool
// aggregator are hostile-input readers with their own descriptor-relative I/O on the
// directories they were opened on; tests give them temporary directories.
//
// Not thread-safe: the role calls Run from its main loop only.
#ifndef EXPANSE_AGENT_CONTROLLER_ROUND_H_
#define EXPANSE_AGENT_CONTROLLER_ROUND_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/batch_builder.h"
#include "agent/job_record_filter.h"
#include "agent/live_detector.h"
#include "agent/node_collector.h"
#include "agent/profiling_permissions.h"
#include "agent/runtime_settings.h"
#include "agent/slurm_allocations.h"
#include "core/host.h"
#include "outbox/outbox.h"
#include "slurm/slurm_client.h"
#include "spool/aggregator.h"

namespace expanse::agent {

// The outbox stream every batch of the controller goes to.
inline constexpr char kTelemetryStream[] = "telemetry";

// How far back sacct is asked after a restart at most.
inline constexpr int64_t kMaxSacctCatchUpMs = 2LL * 24 * 3600 * 1000;
// A failing sacct query's window is halved at each failure down to this.
inline constexpr int64_t kSacctWindowFloorMs = 3600 * 1000;

struct ControllerRoundOptions {
  std::string hostname;  // this host, as its collector names it
  // The shared prefix in use ("" = none): the permission check looks at its worker spool.
  std::string shared_prefix;
  // Node-local control directory (profiling-agent disable marker).
  std::string control_dir = "/var/lib/expanse/control";
  // The cluster's gres.conf, read once through the Host, for mapping squeue's GRES indices of
  // any host to GPUs; "" or absent = none.
  std::string gres_conf_path;
  RuntimeSettings settings;
  // squeue and sacct, run through Host::Run.
  slurm::SlurmClientOptions slurm;
  // Where the time sacct's answers cover up to is kept ("" = in memory only), so that after a
  // restart sacct is asked from there (at most kMaxSacctCatchUpMs back): squeue forgets a job
  // five minutes after it ends, and a job that ended while the daemon was down would otherwise
  // stay RUNNING on the server for good.
  std::string sacct_mark_file;
  // sacct's ended-job records put in one round's batch at most; the rest wait for the next.
  size_t max_accounted_per_round = 10'000;
  std::function<void(const std::string&)> log;
};

// What a round leaves for the heartbeat.
struct RoundReport {
  gpu::Inventory inventory;
  nlohmann::json gpu_use = nlohmann::json::array();
  nlohmann::json capabilities = nlohmann::json::object();
  spool::WorkerHealthSnapshot workers;
  // "round_failures", "aggregator" (this round's drain: files, records, bad, duplicates; null
  // without a worker spool or when it could not be drained), "bad_worker_records" and
  // "bad_worker_records_by_host" (since start), "slurm" and "sacct" ("ok" or the last problem),
  // "live_detection" (triggers, bursts asked and failed, GPUs tracked, the latest triggers).
  nlohmann::json diagnostics = nlohmann::json::object();
};

class ControllerRound {
 public:
  // `collector`, `outbox` and `aggregator` (null = no worker spool) must outlive the round.
  ControllerRound(ControllerRoundOptions options, Host& host, NodeCollector& collector,
                  outbox::Outbox& outbox, spool::Aggregator* aggregator);

  // One round:
  //   1. this host's collection, squeue's jobs and (once a minute) sacct's ended jobs into one
  //      batch, array tasks and het components renamed to SLURM's display ids, each of squeue's
  //      job records only when it changed or every 5 minutes (job_record_filter.h), sacct's at
  //      every query; the collection is committed only once the batch is in the outbox, and
  //      restored otherwise;
  //   2. the workers' spool, one batch per file: every record checked, a bad one dropped,
  //      counted for its host and logged once per host and reason while the rest goes on; a
  //      file with no usable record is refused (the aggregator quarantines it);
  //   3. GPUs of running jobs no hook reported, from squeue's record (slurm_allocations.h);
  //   4. live detection (live_detector.h) over the allocations and GPU series of 1-3: a job
  //      newly stuck or without processes gets a stack burst on every node it has GPUs on, by
  //      one request file per node in the shared control tree (stack_burst_request.h; this
  //      host's own collector directly) and a job.live_detected point per node in the upload.
  // `final`: the last round before exiting. It runs no SLURM command (each can take its full
  // timeout when slurmctld is down) and takes the stack windows still open.
  // Never throws. Everything read from outside is checked; should a bug throw all the same,
  // the round is lost and counted in round_failures, not the process, and nullopt returned.
  std::optional<RoundReport> Run(bool final = false);

  uint64_t round_failures() const { return round_failures_; }
  uint64_t bad_worker_records() const { return bad_records_; }

 private:
  struct RefusedRecords {
    uint64_t count = 0;
    std::string last_reason;
    std::string last_problem;
    std::set<std::string> logged_reasons;
  };

  RoundReport Round(bool final);
  void Log(const std::string& line) const;
  Status Enqueue(const BatchBuilder& batch);
  Status TakeWorkerFile(const spool::SpoolFile& file);
  void NoteRefusedRecords(const std::string& host, uint64_t count, const Status& why);
  nlohmann::json RefusedRecordsJson() const;
  void AddSlurmAllocations(const std::vector<slurm::JobInfo>& jobs,
                           const spool::WorkerHealthSnapshot& workers, int64_t now_ms);
  void Remember(const slurm::JobInfo& job);
  std::optional<std::string> DisplayId(const std::string& number) const;
  // Returns how many rows at the backlog's front the batch now carries.
  size_t AddAccountedJobs(int64_t now_ms, BatchBuilder& batch);
  // squeue's record of a job into the batch unless the server holds it already
  // (job_record_filter.h).
  void AddJobIfNews(wire::JobRecord job, int64_t now_ms, BatchBuilder& batch);
  void Detect(const BatchBuilder& batch, const std::string& only_host = {});
  void AskForStackBursts(const LiveTrigger& trigger, int64_t now_ms);
  nlohmann::json LiveDetectionJson() const;

  const ControllerRoundOptions options_;
  Host& host_;
  NodeCollector& collector_;
  outbox::Outbox& outbox_;
  spool::Aggregator* const aggregator_;
  slurm::SlurmClient slurm_;
  SlurmAllocationFallback fallback_;
  PermissionMonitor permissions_;
  std::function<std::optional<std::string>(const std::string&)> rename_;
  std::string slurm_problem_;
  std::string sacct_problem_;
  std::string sacct_mark_problem_;  // the mark file's last write error, logged once
  // SLURM's job number -> the id squeue and the server use ("130" -> "123_4").
  std::map<std::string, std::string> display_by_number_;
  JobRecordFilter job_filter_;
  int64_t next_sacct_ms_ = 0;
  int64_t last_sacct_ms_ = 0;
  void LoadSacctMark();
  void SaveSacctMark();
  int64_t DurableSacctMark() const;
  void QueryAccountedJobs(int64_t now_ms);
  // The earliest end of an ended job the last query had no backlog room for; 0: none.
  int64_t unkept_since_ms_ = 0;
  // sacct's ended-job records not yet put in a batch (bounded).
  static constexpr size_t kMaxAccountedBacklog = 1'000'000;
  std::deque<wire::JobRecord> accounted_backlog_;
  std::set<std::string> backlog_jobs_;  // the job ids in it, each once
  uint64_t bad_records_ = 0;
  uint64_t round_failures_ = 0;
  std::map<std::string, RefusedRecords> refused_by_host_;
  LiveDetector detector_;
  uint64_t bursts_asked_ = 0;  // request files written, and this host's own bursts started
  uint64_t burst_failures_ = 0;
  std::vector<nlohmann::json> recent_triggers_;  // newest last, bounded
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_CONTROLLER_ROUND_H_
