#include "agent/controller_role.h"

#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "agent/batch_builder.h"
#include "agent/capabilities.h"
#include "agent/gpu_json.h"
#include "agent/heartbeat_builder.h"
#include "agent/profiling_permissions.h"
#include "agent/run_history.h"
#include "agent/sampler_role.h"
#include "agent/slurm_allocations.h"
#include "core/file_util.h"
#include "deploy/daemon_config.h"
#include "net/http_client.h"
#include "outbox/outbox.h"
#include "outbox/payload.h"
#include "outbox/uploader.h"
#include "slurm/slurm_client.h"
#include "spool/aggregator.h"
#include "wire/error_answer.h"
#include "wire/json_parse.h"
#include "wire/records.h"

namespace expanse::agent {
namespace {

constexpr char kStream[] = "telemetry";

wire::JobRecord JobRecordOf(const slurm::JobInfo& j, int64_t observed_ms) {
  return wire::JobRecord{.job_id = j.job_id,
                         .name = j.name,
                         .user = j.user,
                         .account = j.account,
                         .partition = j.partition,
                         .state = j.state,
                         .nodes = j.nodes,
                         .submit_ms = j.submit_ms,
                         .start_ms = j.start_ms,
                         .end_ms = j.end_ms,
                         .req_nodes = j.req_nodes,
                         .req_cpus = j.req_cpus,
                         .req_gpus = j.req_gpus,
                         .req_mem_mib = j.req_mem_mib,
                         .time_limit_s = j.time_limit_s,
                         .observed_ms = observed_ms};
}

// The pending-array record "123_[5-9]" is not a job the server can store as one; its tasks are
// reported once they exist.
// The cluster's gres.conf, for mapping squeue's GRES indices of any host; "" when absent.
std::string ReadGresConf(const std::string& path) {
  if (path.empty())
    return "";
  Result<std::optional<std::string>> text = fs::ReadSmallFile(path, 1 << 20);
  return text.ok() && text->has_value() ? **text : "";
}

bool Storable(const slurm::JobInfo& j) {
  return !j.job_id.empty() && j.job_id.find('[') == std::string::npos && j.job_id.size() <= 64;
}

// What the heartbeat thread reads and the main loop writes.
struct SharedState {
  std::mutex mu;
  std::condition_variable wake;
  gpu::Inventory inventory;
  nlohmann::json gpu_use = nlohmann::json::array();
  nlohmann::json capabilities = nlohmann::json::object();
  spool::WorkerHealthSnapshot workers;
  nlohmann::json outbox = nlohmann::json::object();
  nlohmann::json diagnostics = nlohmann::json::object();
  bool revoked = false;
  std::string revoked_reason;
};

class Controller {
 public:
  Controller(const ControllerOptions& options, Clock& clock, const std::atomic<bool>& stop)
      : options_(options), clock_(clock), stop_(stop), collector_(options.node, clock) {}

  Status Start() {
    EXPANSE_ASSIGN_OR_RETURN(config_, deploy::LoadDaemonConfig(options_.config_path));
    shared_prefix_ = options_.shared_prefix_override.empty() ? config_.shared_prefix
                                                             : options_.shared_prefix_override;
    const RuntimeSettings& s = options_.settings;
    // libcurl reads the proxy from the environment; daemon.env is where operators put it.
    if (!s.https_proxy.empty())
      setenv("HTTPS_PROXY", s.https_proxy.c_str(), 1);
    if (!s.no_proxy.empty())
      setenv("NO_PROXY", s.no_proxy.c_str(), 1);

    outbox::OutboxOptions box;
    box.directory = options_.state_dir + "/outbox";
    box.log = [this](std::string_view line) { Log(std::string(line)); };
    EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(options_.state_dir, 0755));
    EXPANSE_ASSIGN_OR_RETURN(outbox_, outbox::Outbox::Open(box, clock_));

    net::HttpClientOptions http;
    http.ca_file = s.ssl_cert_file;
    http.user_agent = "expanse-daemon/" + options_.daemon_version;
    EXPANSE_ASSIGN_OR_RETURN(upload_client_, net::HttpClient::Create(http));
    EXPANSE_ASSIGN_OR_RETURN(heartbeat_client_, net::HttpClient::Create(http));

    outbox::UploaderOptions up;
    up.data_plane_url = config_.data_plane_url;
    up.log = [this](std::string_view line) { Log(std::string(line)); };
    EXPANSE_ASSIGN_OR_RETURN(
        uploader_, outbox::Uploader::Create(
                       up, *outbox_, *upload_client_, [this] { return Credential(); }, clock_));

    if (!shared_prefix_.empty()) {
      const std::string root = WorkerSpoolRoot(shared_prefix_);
      EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(root, 0755));
      spool::AggregatorOptions agg;
      agg.spool_root = root;
      agg.state_dir = options_.state_dir + "/aggregator";
      agg.expected_uid = geteuid();
      agg.log = [this](std::string_view line) {
        // An idle round is logged once every ten minutes, not every few seconds.
        if (line.find("files=0 records=0 bytes=0 bad=0") != std::string_view::npos) {
          const int64_t now = clock_.NowMs();
          if (now - last_idle_drain_log_ms_ < 10 * 60 * 1000)
            return;
          last_idle_drain_log_ms_ = now;
        }
        Log(std::string(line));
      };
      EXPANSE_ASSIGN_OR_RETURN(aggregator_, spool::Aggregator::Open(agg, clock_));
      // The first heartbeat goes out before the first round: it must already count the
      // workers, or every restart would report "0 of 0" and look like a fresh compute.
      if (Result<spool::WorkerHealthSnapshot> health =
              aggregator_->ReadWorkerHealth(clock_.NowMs());
          health.ok()) {
        shared_.workers = std::move(*health);
      }
    }
    runs_ = RecordStart(options_.state_dir, clock_.NowMs());
    if (runs_.previous_run_unclean) {
      Log("the previous run ended without a clean stop: " + runs_.last_unclean_reason);
    }
    shared_.diagnostics = {{"runs", runs_.ToJson()}};
    Log("controller for compute " + config_.compute_id + " on " + options_.node.hostname +
        (shared_prefix_.empty() ? std::string(", no shared prefix")
                                : ", worker spool " + WorkerSpoolRoot(shared_prefix_)));
    return OkStatus();
  }

  Status Run() {
    std::thread upload([this] {
      while (!Stopping()) {
        Status status = uploader_->Run([this](int64_t wait_ms) { return Wait(wait_ms); });
        if (status.code() == StatusCode::kUnauthenticated) {
          Revoke(status.reason());
          return;
        }
        if (status.ok())
          return;  // stopping
        // The outbox could not be read or acknowledged: say so and try again; the queue on
        // disk is still there.
        Log("uploads paused: " + status.message());
        Wait(5000);
      }
    });
    std::thread heartbeat([this] { HeartbeatLoop(); });

    using Steady = std::chrono::steady_clock;
    auto next_fast = Steady::now();
    auto next_slow = next_fast + options_.slow_interval;
    auto next_flush = next_fast + options_.flush_interval;
    while (!Stopping()) {
      collector_.TickFast();
      const auto now = Steady::now();
      if (now >= next_slow) {
        collector_.TickSlow();
        next_slow = now + options_.slow_interval;
      }
      if (now >= next_flush) {
        GuardedRound();
        next_flush = now + options_.flush_interval;
      }
      next_fast += options_.interval;
      if (next_fast < Steady::now())
        next_fast = Steady::now();
      std::unique_lock lock(shared_.mu);
      shared_.wake.wait_until(lock, next_fast, [this] { return StoppingLocked(); });
    }
    if (!shared_.revoked)
      GuardedRound(/*final=*/true);  // what was sampled since the last round
    {
      std::lock_guard lock(shared_.mu);
      shared_.wake.notify_all();
    }
    upload.join();
    heartbeat.join();
    RecordCleanStop(options_.state_dir);
    std::lock_guard lock(shared_.mu);
    if (shared_.revoked) {
      return UnauthenticatedError("the compute credential was refused (" + shared_.revoked_reason +
                                  "); a replacement credential was probably exchanged. Stopping.")
          .WithReason("credential_revoked");
    }
    return OkStatus();
  }

 private:
  void Log(const std::string& line) {
    if (options_.log)
      options_.log(line);
  }

  std::string Credential() {
    // Re-read so a replacement written by the installer is used without a restart.
    Result<deploy::DaemonConfig> fresh = deploy::LoadDaemonConfig(options_.config_path);
    if (fresh.ok())
      return fresh->credential;
    return config_.credential;
  }

  bool StoppingLocked() const { return stop_.load() || shared_.revoked; }
  bool Stopping() {
    std::lock_guard lock(shared_.mu);
    return StoppingLocked();
  }

  // The uploader's pause between runs; false ends its loop.
  bool Wait(int64_t wait_ms) {
    std::unique_lock lock(shared_.mu);
    if (StoppingLocked())
      return false;
    if (wait_ms > 0) {
      shared_.wake.wait_for(lock, std::chrono::milliseconds(wait_ms),
                            [this] { return StoppingLocked(); });
    }
    return !StoppingLocked();
  }

  void Revoke(const std::string& reason) {
    std::lock_guard lock(shared_.mu);
    if (!shared_.revoked)
      Log("credential refused by the server (" + reason + "); stopping");
    shared_.revoked = true;
    shared_.revoked_reason = reason;
    shared_.wake.notify_all();
  }

  Status Enqueue(const BatchBuilder& batch) {
    return outbox_
        ->Enqueue(kStream,
                  [&batch](uint64_t sequence) {
                    return outbox::ZstdJsonPayload(
                        batch.Render(sequence, kStream)
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
                  })
        .status();
  }

  // Round() must not throw: everything it reads from outside is checked. Should a bug make it
  // throw all the same, the round is lost and counted, not the process: an exception here
  // would unwind past the joinable upload and heartbeat threads and end the daemon, and
  // systemd would restart it into the same input again.
  void GuardedRound(bool final = false) {
    try {
      Round(final);
    } catch (const std::exception& e) {
      ++round_failures_;
      Log(std::string("flush round failed: ") + e.what());
    } catch (...) {
      ++round_failures_;
      Log("flush round failed");
    }
  }

  // One flush round: this host's collection plus SLURM's jobs, then the workers' spool.
  // `final`: the last round before exiting skips the SLURM commands, which can take their full
  // timeout when slurmctld is down.
  void Round(bool final = false) {
    const int64_t now_ms = clock_.NowMs();
    NodeCollection local = collector_.Collect(final);
    for (const std::string& problem : collector_.TakeProblems())
      Log(problem);
    BatchBuilder batch;
    batch.AddSeries(local.series);
    for (const JobEvent& e : local.events)
      batch.AddJobEvent(e);
    for (const auto& a : local.allocations)
      batch.AddAllocation(a);
    batch.AddStacks(local.stacks);
    Result<std::vector<slurm::JobInfo>> jobs =
        final ? Result<std::vector<slurm::JobInfo>>(std::vector<slurm::JobInfo>{})
              : slurm_.ListJobs();
    if (jobs.ok()) {
      for (const slurm::JobInfo& j : *jobs) {
        if (Storable(j))
          batch.AddJob(JobRecordOf(j, now_ms));
        Remember(j);
      }
      slurm_problem_.clear();
    } else {
      if (slurm_problem_ != jobs.status().message())
        Log("squeue: " + jobs.status().message());
      slurm_problem_ = jobs.status().message();
    }
    if (!final)
      AddAccountedJobs(now_ms, batch);
    batch.RenameJobs(rename_);
    fallback_.NoteHookAllocations(batch.allocations());
    if (!batch.empty()) {
      if (Status s = Enqueue(batch); s.ok()) {
        collector_.Commit(local);
      } else {
        Log("cannot queue this host's telemetry: " + s.message());
        collector_.Restore(local);
      }
    }

    spool::WorkerHealthSnapshot workers;
    nlohmann::json drain_json = nullptr;
    if (aggregator_) {
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
        workers = std::move(*health);
    }
    if (jobs.ok() && !final)
      AddSlurmAllocations(*jobs, workers, now_ms);

    CapabilityInputs inputs;
    inputs.settings = options_.settings;
    inputs.gpu = collector_.GpuHealth();
    inputs.shared_prefix = shared_prefix_;
    inputs.hostname = options_.node.hostname;
    if (!permissions_) {
      permissions_ = std::make_unique<PermissionMonitor>(
          DaemonPermissionOptions(
              options_.control_dir, shared_prefix_,
              shared_prefix_.empty() ? std::string() : WorkerSpoolRoot(shared_prefix_)),
          options_.settings.profiling_agent_enable);
    }
    inputs.profiling_permissions_problem =
        permissions_->Check(now_ms, [this](const std::string& line) { Log(line); });
    inputs.py_stacks = collector_.PyStacksCapability();
    const char* path = std::getenv("PATH");
    inputs.path_env = path ? path : "/usr/bin:/bin";
    const outbox::OutboxStats box = outbox_->stats();
    const outbox::UploaderStats up = uploader_->stats();
    std::lock_guard lock(shared_.mu);
    shared_.inventory = collector_.Inventory();
    shared_.gpu_use = collector_.GpuUse();
    shared_.capabilities = CapabilitiesJson(DescribeCapabilities(inputs));
    shared_.workers = std::move(workers);
    shared_.diagnostics = {
        {"runs", runs_.ToJson()},
        {"round_failures", round_failures_},
        {"aggregator", drain_json},
        {"bad_worker_records", bad_records_},
        {"bad_worker_records_by_host", RefusedRecordsJson()},
        {"slurm", slurm_problem_.empty() ? nlohmann::json("ok") : nlohmann::json(slurm_problem_)},
        {"sacct", sacct_problem_.empty() ? nlohmann::json("ok") : nlohmann::json(sacct_problem_)},
        {"uploader",
         {{"sent", up.sent},
          {"acked", up.acked},
          {"duplicates", up.duplicates},
          {"retries", up.retries},
          {"dead_lettered", up.dead_lettered},
          {"last_error", up.last_error}}},
        {"outbox_detail", {{"depth_bytes", box.depth_bytes}, {"disk_bytes", box.disk_bytes}}}};
    shared_.outbox = {{"depth_batches", box.depth_entries},
                      {"depth_bytes", box.depth_bytes},
                      {"dropped_batches", box.dropped_entries},
                      {"dead_lettered_batches", box.dead_lettered_entries}};
  }

  // The aggregator's sink: a worker's spool file into the outbox. Every record is checked
  // against its wire schema (BatchBuilder::AddSpoolRecord); what fails is dropped, counted
  // for its host and logged once per host and reason, and the rest goes on. A file none of
  // whose records could be taken is refused (kDataLoss) so the aggregator quarantines it.
  Status TakeWorkerFile(const spool::SpoolFile& file) {
    BatchBuilder from_worker;
    uint64_t accepted = 0;
    uint64_t refused = 0;
    Status first_refusal;
    for (const spool::SpoolRecord& r : file.records) {
      BatchBuilder::Intake intake = from_worker.AddSpoolRecord(r.kind, r.payload);
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
    return Enqueue(from_worker);
  }

  void NoteRefusedRecords(const std::string& host, uint64_t count, const Status& why) {
    bad_records_ += count;
    // Bounded by the spool's host directories; a cap all the same.
    if (refused_by_host_.size() >= 4096 && !refused_by_host_.contains(host))
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

  nlohmann::json RefusedRecordsJson() const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [host, tally] : refused_by_host_) {
      if (out.size() >= 50)
        break;  // the heartbeat stays small; the total is in bad_worker_records
      out[host] = {{"records", tally.count},
                   {"last_reason", tally.last_reason},
                   {"last_problem", tally.last_problem}};
    }
    return out;
  }

  // SLURM's number for an array task or het component -> the id squeue and the server use.
  // GPUs of running jobs that no hook reported (slurm_allocations.h), from this round's squeue.
  void AddSlurmAllocations(const std::vector<slurm::JobInfo>& jobs,
                           const spool::WorkerHealthSnapshot& workers, int64_t now_ms) {
    std::map<std::string, std::vector<gpu::GpuInfo>> inventories;
    inventories[options_.node.hostname] = collector_.Inventory().gpus;
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
    if (entries.empty())
      return;
    BatchBuilder batch;
    for (wire::GpuAllocationRecord& e : entries)
      batch.AddAllocation(std::move(e));
    if (Status s = Enqueue(batch); !s.ok())
      Log("cannot queue SLURM's GPU allocations: " + s.message());
  }

  void Remember(const slurm::JobInfo& j) {
    if (j.slurm_job_id <= 0 || !Storable(j))
      return;
    const std::string number = std::to_string(j.slurm_job_id);
    if (j.job_id == number)
      return;
    if (display_by_number_.size() > 200'000)
      display_by_number_.clear();  // bounded
    display_by_number_[number] = j.job_id;
  }

  // Jobs' final records from slurmdbd, once a minute: squeue forgets a job MinJobAge after it
  // ended, and only sacct knows how jobs that ended while the daemon was down finished. Without
  // accounting, sacct is asked again only every ten minutes (it may be configured later).
  void AddAccountedJobs(int64_t now_ms, BatchBuilder& batch) {
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
      return;
    }
    sacct_problem_.clear();
    last_sacct_ms_ = now_ms;
    next_sacct_ms_ = now_ms + 60 * 1000;
    for (const slurm::JobInfo& j : *jobs) {
      // Only ended jobs: squeue is the fresher source for the others.
      Remember(j);
      if (Storable(j) && j.end_ms > 0 && j.state != "RUNNING" && j.state != "PENDING") {
        batch.AddJob(JobRecordOf(j, now_ms));
      }
    }
  }

  void HeartbeatLoop() {
    // The first heartbeat goes out at once: it is what proves enrolment to the installer.
    bool first = true;
    while (true) {
      {
        std::unique_lock lock(shared_.mu);
        if (!first) {
          shared_.wake.wait_for(lock, options_.heartbeat_interval,
                                [this] { return StoppingLocked(); });
        }
        if (StoppingLocked())
          return;
      }
      first = false;
      SendHeartbeat();
    }
  }

  void SendHeartbeat() {
    HeartbeatInputs in;
    {
      std::lock_guard lock(shared_.mu);
      in.controller_inventory = shared_.inventory;
      in.controller_gpu_use = shared_.gpu_use;
      in.controller_capabilities = shared_.capabilities;
      in.workers = shared_.workers;
      in.outbox = shared_.outbox;
      in.diagnostics = shared_.diagnostics;
    }
    in.daemon_version = options_.daemon_version;
    in.controller_host = options_.node.hostname;
    net::HttpRequest request;
    request.method = "POST";
    request.url = config_.control_plane_url + "/cp/v1/heartbeat";
    request.headers = {{"Authorization", "Bearer " + Credential()},
                       {"Content-Type", "application/json"}};
    // Replace, not throw, should any text not be UTF-8 (a log line, a worker's field).
    request.body =
        BuildHeartbeat(in).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    Result<net::HttpResponse> response = heartbeat_client_->Send(request);
    if (!response.ok()) {
      Log("heartbeat not sent: " + response.status().message());
      return;
    }
    if (response->status == 200) {
      if (!heartbeat_ok_)
        Log("heartbeat accepted; " + in.workers.Summary());
      heartbeat_ok_ = true;
      return;
    }
    heartbeat_ok_ = false;
    const std::string code = wire::DecodeErrorAnswer(response->body).code;
    if (response->status == 401 && (code == "credential_revoked" || code == "credential_invalid")) {
      Revoke(code);
      return;
    }
    Log("heartbeat refused: HTTP " + std::to_string(response->status) + " " + code);
  }

  const ControllerOptions& options_;
  Clock& clock_;
  const std::atomic<bool>& stop_;
  NodeCollector collector_;
  deploy::DaemonConfig config_;
  std::string shared_prefix_;
  std::unique_ptr<outbox::Outbox> outbox_;
  std::unique_ptr<net::HttpClient> upload_client_;
  std::unique_ptr<net::HttpClient> heartbeat_client_;
  std::unique_ptr<outbox::Uploader> uploader_;
  std::unique_ptr<spool::Aggregator> aggregator_;
  slurm::SlurmClient slurm_{slurm::SlurmClientOptions{}};
  std::string slurm_problem_;
  std::string sacct_problem_;
  std::map<std::string, std::string> display_by_number_;
  SlurmAllocationFallback fallback_{ReadGresConf(options_.node.gres_conf_path), clock_.NowMs()};
  std::function<std::optional<std::string>(const std::string&)> rename_ =
      [this](const std::string& id) -> std::optional<std::string> {
    auto it = display_by_number_.find(id);
    if (it == display_by_number_.end())
      return std::nullopt;
    return it->second;
  };
  int64_t next_sacct_ms_ = 0;
  int64_t last_sacct_ms_ = 0;
  uint64_t bad_records_ = 0;
  uint64_t round_failures_ = 0;
  RunHistory runs_;
  struct RefusedRecords {
    uint64_t count = 0;
    std::string last_reason;
    std::string last_problem;
    std::set<std::string> logged_reasons;
  };
  std::map<std::string, RefusedRecords> refused_by_host_;
  bool heartbeat_ok_ = false;
  int64_t last_idle_drain_log_ms_ = 0;
  std::unique_ptr<PermissionMonitor> permissions_;
  SharedState shared_;
};

}  // namespace

Status RunControllerRole(const ControllerOptions& options, Clock& clock,
                         const std::atomic<bool>& stop) {
  Controller controller(options, clock, stop);
  EXPANSE_RETURN_IF_ERROR(controller.Start());
  return controller.Run();
}

}  // namespace expanse::agent
