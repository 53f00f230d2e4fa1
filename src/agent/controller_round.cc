#include "agent/controller_round.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <utility>

#include "agent/capabilities.h"
#include "agent/gpu_json.h"
#include "agent/sampler_role.h"
#include "agent/slurm_job_record.h"
#include "agent/stack_burst_request.h"
#include "outbox/payload.h"
#include "wire/json_parse.h"
#include "wire/records.h"

namespace expanse::agent {
namespace {

// gres.conf is a few lines per node type; a bigger file is not one.
constexpr size_t kMaxGresConfBytes = 1 << 20;
// Bounded by the spool's host directories; a cap all the same.
constexpr size_t kMaxRefusingHosts = 4096;
// The heartbeat stays small; the total is in bad_worker_records.
constexpr size_t kMaxRefusingHostsReported = 50;

// The cluster's gres.conf; "" when there is none or it cannot be read.
std::string ReadGresConf(Host& host, const std::string& path) {
  if (path.empty())
    return "";
  Result<std::optional<std::string>> text = host.ReadFile(path, kMaxGresConfBytes);
  return text.ok() && text->has_value() ? **text : "";
}

LiveDetectorOptions LiveOptionsOf(const RuntimeSettings& s) {
  LiveDetectorOptions o;
  o.stuck_after_ms = int64_t{s.live_stuck_after_s} * 1000;
  o.no_process_after_ms = int64_t{s.live_no_process_after_s} * 1000;
  return o;
}

// Kept for the heartbeat's diagnostics, each naming at most a few hosts.
constexpr size_t kRecentTriggers = 16;
constexpr size_t kRecentTriggerHosts = 8;

}  // namespace

ControllerRound::ControllerRound(ControllerRoundOptions options, Host& host,
                                 NodeCollector& collector, outbox::Outbox& outbox,
                                 spool::Aggregator* aggregator)
    : options_(std::move(options)),
      host_(host),
      collector_(collector),
      outbox_(outbox),
      aggregator_(aggregator),
      slurm_(options_.slurm, [h = &host](const SubprocessOptions& run) { return h->Run(run); }),
      fallback_(ReadGresConf(host, options_.gres_conf_path), host.clock().NowMs()),
      permissions_(DaemonPermissionOptions(options_.control_dir, options_.shared_prefix,
                                           options_.shared_prefix.empty()
                                               ? std::string()
                                               : WorkerSpoolRoot(options_.shared_prefix),
                                           options_.hostname),
                   options_.settings.profiling_agent_enable),
      rename_([this](const std::string& id) { return DisplayId(id); }),
      detector_(LiveOptionsOf(options_.settings)) {
  LoadSacctMark();
}

void ControllerRound::Log(const std::string& line) const {
  if (options_.log)
    options_.log(line);
}

std::optional<RoundReport> ControllerRound::Run(bool final) {
  // An exception here would unwind past the role's joinable upload and heartbeat threads and
  // end the daemon, and systemd would restart it into the same input again.
  try {
    return Round(final);
  } catch (const std::exception& e) {
    ++round_failures_;
    Log(std::string("flush round failed: ") + e.what());
  } catch (...) {
    ++round_failures_;
    Log("flush round failed");
  }
  return std::nullopt;
}

RoundReport ControllerRound::Round(bool final) {
  const int64_t now_ms = host_.clock().NowMs();
  job_filter_.Abandon();  // what a round that threw had taken was never queued
  NodeCollection local = collector_.Collect(final);
  // A throw from here to the hand-off (Run catches it) must not leave the collection neither
  // committed nor restored: its event files would not be collected again until a restart.
  struct RestoreUnlessSettled {
    NodeCollector& collector;
    const NodeCollection& collection;
    bool settled = false;
    ~RestoreUnlessSettled() {
      if (!settled)
        collector.Restore(collection);
    }
  } guard{collector_, local};
  for (const std::string& problem : collector_.TakeProblems())
    Log(problem);
  BatchBuilder batch;
  batch.AddSeries(local.series);
  for (const JobEvent& e : local.events)
    batch.AddJobEvent(e);
  for (const auto& a : local.allocations)
    batch.AddAllocation(a);
  batch.AddStacks(local.stacks);
  batch.AddCaptureAggregates(local.captures);
  Result<std::vector<slurm::JobInfo>> jobs =
      final ? Result<std::vector<slurm::JobInfo>>(std::vector<slurm::JobInfo>{})
            : slurm_.ListJobs();
  if (jobs.ok()) {
    for (const slurm::JobInfo& j : *jobs) {
      if (SendableJob(j))
        AddJobIfNews(SlurmJobRecord(j, now_ms), now_ms, batch);
      Remember(j);
    }
    slurm_problem_.clear();
  } else {
    if (slurm_problem_ != jobs.status().message())
      Log("squeue: " + jobs.status().message());
    slurm_problem_ = jobs.status().message();
  }
  size_t accounted = 0;  // sacct rows at the backlog's front put in this batch
  if (!final)
    accounted = AddAccountedJobs(now_ms, batch);
  batch.RenameJobs(rename_);
  fallback_.NoteHookAllocations(batch.allocations());
  if (!batch.empty()) {
    if (Status s = Enqueue(batch); s.ok()) {
      guard.settled = true;
      collector_.Commit(local);
      job_filter_.Commit(now_ms);
      if (accounted != 0) {
        for (size_t i = 0; i < accounted; ++i)
          backlog_jobs_.erase(accounted_backlog_[i].job_id);
        accounted_backlog_.erase(accounted_backlog_.begin(),
                                 accounted_backlog_.begin() + static_cast<ptrdiff_t>(accounted));
        SaveSacctMark();  // the rows queued no longer hold it back
      }
      Detect(batch);
    } else {
      Log("cannot queue this host's telemetry: " + s.message());
      guard.settled = true;
      collector_.Restore(local);
      job_filter_.Abandon();
    }
  } else {
    guard.settled = true;
    collector_.Commit(local);    // nothing in it to hand on
    job_filter_.Commit(now_ms);  // nothing taken: only forgets jobs SLURM no longer lists
  }

  RoundReport report;
  nlohmann::json drain_json = nullptr;
  if (aggregator_ != nullptr) {
    Result<spool::DrainStats> drained = aggregator_->DrainOnce(
        [this](const spool::SpoolFile& file) { return TakeWorkerFile(file); });
    if (drained.ok()) {
      drain_json = {{"files", drained->files},
                    {"records", drained->records},
                    {"bad", drained->bad},
                    {"duplicates", drained->duplicates}};
    } else {
      Log("worker spool: " + drained.status().message());
    }
    Result<spool::WorkerHealthSnapshot> health = aggregator_->ReadWorkerHealth(now_ms);
    if (health.ok())
      report.workers = std::move(*health);
  }
  if (jobs.ok() && !final)
    AddSlurmAllocations(*jobs, report.workers, now_ms);
  if (options_.settings.live_detection && !final) {
    if (jobs.ok()) {
      std::set<std::string> running;
      for (const slurm::JobInfo& j : *jobs) {
        if (j.state == "RUNNING" || j.state == "SUSPENDED" || j.state == "COMPLETING")
          running.insert(j.job_id);
      }
      detector_.KeepOnlyJobs(running);
    }
    const int64_t detect_ms = host_.clock().NowMs();
    for (const LiveTrigger& trigger : detector_.TakeTriggers(detect_ms))
      AskForStackBursts(trigger, detect_ms);
  }

  CapabilityInputs inputs;
  inputs.settings = options_.settings;
  inputs.gpu = collector_.GpuHealth();
  inputs.shared_prefix = options_.shared_prefix;
  inputs.hostname = options_.hostname;
  inputs.profiling_permissions_problem =
      permissions_.Check(now_ms, [this](const std::string& line) { Log(line); });
  inputs.py_stacks = collector_.PyStacksCapability();
  inputs.cupti = collector_.CuptiCapability();
  inputs.dcgm = collector_.DcgmCapability();
  inputs.path_env = host_.GetEnv("PATH").value_or("/usr/bin:/bin");
  report.inventory = collector_.Inventory();
  report.gpu_use = collector_.GpuUse();
  report.capabilities = CapabilitiesJson(DescribeCapabilities(inputs));
  report.diagnostics = {
      {"round_failures", round_failures_},
      {"aggregator", drain_json},
      {"bad_worker_records", bad_records_},
      {"bad_worker_records_by_host", RefusedRecordsJson()},
      {"slurm", slurm_problem_.empty() ? nlohmann::json("ok") : nlohmann::json(slurm_problem_)},
      {"sacct", sacct_problem_.empty() ? nlohmann::json("ok") : nlohmann::json(sacct_problem_)},
      {"live_detection", LiveDetectionJson()}};
  return report;
}

Status ControllerRound::Enqueue(const BatchBuilder& batch) {
  return outbox_
      .Enqueue(kTelemetryStream,
               [&batch](uint64_t sequence) {
                 // Replace, not throw, should any text not be UTF-8 (a worker's field).
                 return outbox::ZstdJsonPayload(
                     batch.Render(sequence, kTelemetryStream)
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
               })
      .status();
}

// The aggregator's sink: a worker's spool file into the outbox. Every record is checked
// against its wire schema (BatchBuilder::AddSpoolRecord).
Status ControllerRound::TakeWorkerFile(const spool::SpoolFile& file) {
  BatchBuilder from_worker;
  uint64_t accepted = 0;
  uint64_t refused = 0;
  Status first_refusal;
  for (const spool::SpoolRecord& r : file.records) {
    BatchBuilder::Intake intake = from_worker.AddSpoolRecord(r.kind, r.payload, file.host);
    accepted += intake.accepted;
    refused += intake.refused;
    if (first_refusal.ok() && !intake.first_refusal.ok())
      first_refusal = std::move(intake.first_refusal);
  }
  if (refused > 0)
    NoteRefusedRecords(file.host, refused, first_refusal);
  if (accepted == 0 && refused > 0) {
    return DataLossError("no record could be taken: " + first_refusal.message())
        .WithReason("bad_records");
  }
  if (from_worker.empty())
    return OkStatus();
  from_worker.RenameJobs(rename_);
  fallback_.NoteHookAllocations(from_worker.allocations());
  EXPANSE_RETURN_IF_ERROR(Enqueue(from_worker));
  Detect(from_worker, file.host);  // once it is queued: a file that failed comes again
  return OkStatus();
}

// What the live detector takes of a batch on its way to the outbox. A worker's file (`only_host`
// set) speaks only for its own host's GPUs: an allocation naming another host is not tracked,
// so no worker can have the controller ask another node for a burst. (Its series are checked
// on intake; a NodeName that differs from the host's name never matched them anyway.)
void ControllerRound::Detect(const BatchBuilder& batch, const std::string& only_host) {
  if (!options_.settings.live_detection)
    return;
  const int64_t now_ms = host_.clock().NowMs();
  for (const wire::GpuAllocationRecord& a : batch.allocations()) {
    if (only_host.empty() || a.host == only_host)
      detector_.NoteAllocation(a, now_ms);
  }
  detector_.NoteSeries(batch.series(), now_ms);
}

// One request per node of the job, all with the same trigger time and nonce, so each node's
// burst window starts at the same instant (docs/formats/stack-burst.md).
void ControllerRound::AskForStackBursts(const LiveTrigger& t, int64_t now_ms) {
  StackBurstRequest request{.job_id = t.job_id,
                            .slurm_job_id = t.slurm_job_id,
                            .reason = t.reason,
                            // Off the whole second: a regular stack window (whole seconds long,
                            // aligned) never starts at the same instant as a burst's.
                            .trigger_ms = now_ms % 1000 == 0 ? now_ms + 1 : now_ms,
                            .since_ms = t.since_ms,
                            .nonce = NewStackBurstNonce()};
  const std::string number = t.slurm_job_id > 0 ? std::to_string(t.slurm_job_id) : t.job_id;
  // The log names a few nodes; a job on hundreds gets counts.
  std::string asked, failed;
  size_t asked_count = 0, failed_count = 0;
  for (const std::string& host : t.hosts) {
    Status s;
    if (host == options_.hostname) {
      s = collector_.RequestStackBurst(number, request.trigger_ms);
    } else if (options_.shared_prefix.empty()) {
      s = FailedPreconditionError("no shared prefix to reach " + host + " through");
    } else {
      s = WriteStackBurstRequest(host_, ControlTreeRoot(options_.shared_prefix), host, request);
    }
    if (s.ok()) {
      ++bursts_asked_;
      if (++asked_count <= kRecentTriggerHosts)
        asked += (asked.empty() ? "" : ", ") + host;
    } else {
      ++burst_failures_;
      if (++failed_count == 1)
        failed = host + ": " + s.message().substr(0, 200);
    }
  }
  if (asked_count > kRecentTriggerHosts)
    asked += " and " + std::to_string(asked_count - kRecentTriggerHosts) + " more";
  Log("live detection: job " + t.job_id + " " + t.reason + " since " + std::to_string(t.since_ms) +
      " ms on " + std::to_string(t.gpus.size()) + " GPU(s); stack burst asked of " +
      (asked.empty() ? "no node" : asked) +
      (failed.empty()
           ? ""
           : " (failed on " + std::to_string(failed_count) + " node(s), first " + failed + ")"));

  // "Detected at T" for the server: one point on the job's series of each of its hosts (the
  // job's timeline reads job/<id> series per host), 1 stuck, 2 no_process.
  BatchBuilder marks;
  std::vector<wire::SeriesRecord> points;
  for (const std::string& host : t.hosts) {
    wire::SeriesRecord mark{.host = host,
                            .device = "job/" + t.job_id,
                            .metric = "job.live_detected",
                            .t0 = request.trigger_ms,
                            .dt = {0},
                            .v = {t.reason == "stuck" ? 1.0 : 2.0}};
    // Only what the server's decoder takes: a refused series would cost the whole batch.
    if (wire::DecodeSeries(wire::Encode(mark), "mark", "bad_record").ok())
      points.push_back(std::move(mark));
  }
  if (!points.empty()) {
    marks.AddSeries(std::move(points));
    if (Status s = Enqueue(marks); !s.ok())
      Log("cannot queue the live detection marks: " + s.message());
  }

  // The heartbeat's diagnostics are capped (64 KiB): a few hosts of a big job, and counts.
  nlohmann::json hosts = nlohmann::json::array();
  for (size_t i = 0; i < t.hosts.size() && i < kRecentTriggerHosts; ++i)
    hosts.push_back(t.hosts[i]);
  recent_triggers_.push_back({{"job_id", t.job_id},
                              {"reason", t.reason},
                              {"since_ms", t.since_ms},
                              {"trigger_ms", request.trigger_ms},
                              {"hosts", std::move(hosts)},
                              {"host_count", t.hosts.size()},
                              {"gpu_count", t.gpus.size()}});
  if (recent_triggers_.size() > kRecentTriggers)
    recent_triggers_.erase(recent_triggers_.begin());
}

nlohmann::json ControllerRound::LiveDetectionJson() const {
  if (!options_.settings.live_detection)
    return "off";
  const LiveDetectorStats& s = detector_.stats();
  return {{"triggers", s.triggers},
          {"bursts_asked", bursts_asked_},
          {"burst_failures", burst_failures_},
          {"gpus_tracked", detector_.tracked_gpus()},
          {"gpus_refused", s.gpus_refused},
          {"recent", recent_triggers_}};
}

void ControllerRound::NoteRefusedRecords(const std::string& host, uint64_t count,
                                         const Status& why) {
  bad_records_ += count;
  if (refused_by_host_.size() >= kMaxRefusingHosts && !refused_by_host_.contains(host))
    return;
  RefusedRecords& tally = refused_by_host_[host];
  tally.count += count;
  const std::string reason = why.reason().empty() ? "bad_record" : why.reason();
  tally.last_reason = reason;
  tally.last_problem = why.message().substr(0, 200);
  if (tally.logged_reasons.insert(reason).second && tally.logged_reasons.size() <= 16) {
    Log("worker spool: refused " + std::to_string(count) + " record(s) from " + host + " (" +
        reason + "): " + tally.last_problem + "; the rest of its data goes on");
  }
}

nlohmann::json ControllerRound::RefusedRecordsJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [host, tally] : refused_by_host_) {
    if (out.size() >= kMaxRefusingHostsReported)
      break;
    out[host] = {{"records", tally.count},
                 {"last_reason", tally.last_reason},
                 {"last_problem", tally.last_problem}};
  }
  return out;
}

// GPUs of running jobs that no hook reported (slurm_allocations.h), from this round's squeue.
void ControllerRound::AddSlurmAllocations(const std::vector<slurm::JobInfo>& jobs,
                                          const spool::WorkerHealthSnapshot& workers,
                                          int64_t now_ms) {
  std::map<std::string, std::vector<gpu::GpuInfo>> inventories;
  inventories[options_.hostname] = collector_.Inventory().gpus;
  for (const spool::WorkerHealthReport& report : workers.reports) {
    Result<nlohmann::json> health =
        wire::ParseJson(report.payload, wire::JsonLimits{.max_depth = 8});
    if (health.ok() && health->is_object() && health->contains("inventory"))
      inventories[report.host] = GpusFromJson((*health)["inventory"]);
  }
  std::vector<std::string> problems;
  std::vector<wire::GpuAllocationRecord> entries =
      fallback_.Reconcile(jobs, inventories, now_ms, &problems);
  for (const std::string& problem : problems)
    Log(problem);
  // A worker's health report names its GPUs: a UUID the server would refuse (too long, a
  // control character) is that worker's bad record, not a reason to lose every allocation.
  BatchBuilder batch;
  for (wire::GpuAllocationRecord& e : entries) {
    Result<wire::GpuAllocationRecord> checked =
        wire::DecodeGpuAllocation(wire::Encode(e), "allocation", "bad_record");
    if (checked.ok())
      batch.AddAllocation(std::move(e));
    else
      NoteRefusedRecords(e.host, 1, checked.status());
  }
  if (batch.allocations().empty())
    return;
  if (Status s = Enqueue(batch); !s.ok())
    Log("cannot queue SLURM's GPU allocations: " + s.message());
  else
    Detect(batch);
}

// SLURM's number for an array task or het component -> the id squeue and the server use.
void ControllerRound::Remember(const slurm::JobInfo& j) {
  if (j.slurm_job_id <= 0 || !StorableJobId(j.job_id))
    return;
  const std::string number = std::to_string(j.slurm_job_id);
  if (j.job_id == number) {
    // A plain job with the number of a task remembered before (ids start again after
    // slurmctld's state is wiped): its records are its own.
    display_by_number_.erase(number);
    return;
  }
  if (display_by_number_.size() > 200'000)
    display_by_number_.clear();  // bounded
  display_by_number_[number] = j.job_id;
}

std::optional<std::string> ControllerRound::DisplayId(const std::string& number) const {
  auto it = display_by_number_.find(number);
  if (it == display_by_number_.end())
    return std::nullopt;
  return it->second;
}

void ControllerRound::AddJobIfNews(wire::JobRecord job, int64_t now_ms, BatchBuilder& batch) {
  if (job_filter_.Take(job, now_ms))
    batch.AddJob(std::move(job));
}

void ControllerRound::LoadSacctMark() {
  if (options_.sacct_mark_file.empty())
    return;
  const int64_t now_ms = host_.clock().NowMs();
  Result<std::optional<std::string>> text = host_.ReadFile(options_.sacct_mark_file, 64);
  if (!text.ok() || !text->has_value()) {
    if (!text.ok())
      Log("sacct mark: " + text.status().message());
    return;
  }
  int64_t mark = 0;
  const std::string& digits = **text;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), mark);
  if (error != std::errc() || (end != digits.data() + digits.size() && *end != '\n') || mark <= 0 ||
      mark > now_ms) {
    Log("sacct mark " + options_.sacct_mark_file + " is not a past time in ms: ignored");
    return;
  }
  last_sacct_ms_ = std::max(mark, now_ms - kMaxSacctCatchUpMs);
}

// What a restart may start its catch-up from: where sacct was last asked, but never past an
// ended job whose record is not queued yet (the backlog, or rows it had no room for), so that
// a daemon stopped in a long catch-up asks for those again rather than leaving them running on
// the server for good.
int64_t ControllerRound::DurableSacctMark() const {
  int64_t mark = last_sacct_ms_;
  if (unkept_since_ms_ > 0)
    mark = std::min(mark, unkept_since_ms_);
  for (const wire::JobRecord& j : accounted_backlog_) {
    if (j.end_ms > 0)
      mark = std::min(mark, j.end_ms);
  }
  return mark;
}

void ControllerRound::SaveSacctMark() {
  if (options_.sacct_mark_file.empty())
    return;
  const Status written =
      host_.WriteFile(options_.sacct_mark_file, std::to_string(DurableSacctMark()) + "\n", 0600,
                      geteuid(), getegid());
  if (!written.ok() && sacct_mark_problem_ != written.message())
    Log("sacct mark: " + written.message());
  sacct_mark_problem_ = written.ok() ? "" : written.message();
}

// Jobs' final records from slurmdbd, once a minute: squeue forgets a job MinJobAge after it
// ended, and only sacct knows how jobs that ended while the daemon was down finished. Without
// accounting, sacct is asked again only every ten minutes (it may be configured later).
size_t ControllerRound::AddAccountedJobs(int64_t now_ms, BatchBuilder& batch) {
  QueryAccountedJobs(now_ms);
  // A catch-up after a restart may answer with more jobs than a batch may carry (the server
  // refuses more than 100,000 records): they go out a share per round, leaving the backlog
  // once queued (a batch that could not be queued takes none of them).
  const size_t n = std::min(options_.max_accounted_per_round, accounted_backlog_.size());
  for (size_t i = 0; i < n; ++i)
    batch.AddJob(accounted_backlog_[i]);
  return n;
}

void ControllerRound::QueryAccountedJobs(int64_t now_ms) {
  if (now_ms < next_sacct_ms_)
    return;
  const int64_t since_s = (last_sacct_ms_ > 0 ? last_sacct_ms_ : now_ms) / 1000 - 300;
  Result<std::vector<slurm::JobInfo>> jobs = slurm_.ListAccounted(since_s);
  if (!jobs.ok()) {
    const bool disabled = jobs.status().reason() == "accounting_disabled";
    next_sacct_ms_ = now_ms + (disabled ? 10 * 60 * 1000 : 60 * 1000);
    if (!disabled && sacct_problem_ != jobs.status().message()) {
      Log("sacct: " + jobs.status().message());
    }
    sacct_problem_ = disabled ? "accounting disabled" : jobs.status().message();
    // A long window's answer may be what fails (past the timeout or the output cap): it is
    // halved at each such failure down to an hour, or it would fail every minute for good.
    // Other failures (slurmdbd away) keep the window: it is asked whole once sacct answers.
    const bool too_much = jobs.status().reason() == "slurm_timeout" ||
                          jobs.status().reason() == "slurm_output_too_large";
    if (too_much && last_sacct_ms_ > 0 && now_ms - last_sacct_ms_ > kSacctWindowFloorMs) {
      last_sacct_ms_ += std::max<int64_t>(0, now_ms - kSacctWindowFloorMs - last_sacct_ms_) / 2;
      SaveSacctMark();  // never past an ended job not yet queued
    }
    return;
  }
  sacct_problem_.clear();
  const int64_t asked_from_ms = last_sacct_ms_;
  last_sacct_ms_ = now_ms;
  unkept_since_ms_ = 0;
  next_sacct_ms_ = now_ms + 60 * 1000;
  size_t unkept = 0;
  for (const slurm::JobInfo& j : *jobs) {
    // Only ended jobs: squeue is the fresher source for the others.
    Remember(j);
    // Sent at every query that covers the job, unfiltered: a job's final record is the one
    // that must not be lost with a batch the server refused (the outbox's dead letters), and
    // each query's window ((300 + 60) s) sends it about six times, then never again.
    if (!SendableJob(j) || j.end_ms <= 0 || j.state == "RUNNING" || j.state == "PENDING")
      continue;
    wire::JobRecord record = SlurmJobRecord(j, now_ms);
    if (backlog_jobs_.contains(record.job_id))
      continue;  // waiting already (asked again while its batch could not be queued)
    if (accounted_backlog_.size() < kMaxAccountedBacklog) {
      backlog_jobs_.insert(record.job_id);
      accounted_backlog_.push_back(std::move(record));
    } else {
      // No room: asked again from the earliest such end once the backlog has drained.
      ++unkept;
      unkept_since_ms_ = unkept_since_ms_ == 0 ? j.end_ms : std::min(unkept_since_ms_, j.end_ms);
    }
  }
  if (unkept != 0) {
    last_sacct_ms_ = std::max(asked_from_ms, unkept_since_ms_);
    Log("sacct: " + std::to_string(unkept) + " ended jobs did not fit the backlog of " +
        std::to_string(kMaxAccountedBacklog) + "; asked again once it drains");
    next_sacct_ms_ = now_ms + 10 * 60 * 1000;
  }
  SaveSacctMark();
}

}  // namespace expanse::agent
