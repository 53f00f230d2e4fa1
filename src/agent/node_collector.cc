#include "agent/node_collector.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>

#include "agent/gpu_use.h"
#include "agent/job_devices_check.h"
#include "agent/phase_b_triggers.h"
#include "attribution/allocation.h"
#include "core/file_util.h"
#include "gpu/guarded_backend.h"
#include "wire/json_parse.h"

namespace expanse::agent {
namespace {

constexpr size_t kMaxUnsentStacks = 100'000;
constexpr size_t kMaxUnsentAllocations = 100'000;

// When the node booted, from the `btime` line of /proc/stat (the kernel keeps it in step with
// the wall clock); nullopt when unreadable.
std::optional<int64_t> BootTimeMs(const std::string& proc_stat) {
  std::ifstream stat(proc_stat);
  std::string key;
  int64_t seconds = 0;
  while (stat >> key) {
    if (key == "btime" && stat >> seconds && seconds > 0)
      return seconds * 1000;
    stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

}  // namespace

NodeCollector::NodeCollector(NodeCollectorOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      sink_(options_.hostname, buffer_, buffer_mu_),
      escalation_({.idle_percent = options_.idle_sm_util_percent}),
      cgroups_(options_.cgroups),
      cuda_tools_(options_.attribution),
      boot_ms_(BootTimeMs(options_.cgroups.proc_stat)) {
  gpu::SelectedBackend selected = gpu::SelectBackend(options_.backend);
  std::unique_ptr<gpu::GuardedBackend> guarded;
  if (selected.backend) {
    guarded =
        std::make_unique<gpu::GuardedBackend>(std::move(selected.backend), options_.call_timeout);
  }
  sampler_ =
      std::make_unique<gpu::Sampler>(std::move(guarded), selected.NoBackendReason(), clock_, sink_);
  LoadOpenAllocations();
  LoadUncommittedCloses();
  if (options_.counters)
    counters_ = std::make_unique<CounterHelper>(*options_.counters, clock_, monotonic_);
  if (options_.dcgm)
    dcgm_ = std::make_unique<DcgmEnricher>(*options_.dcgm, clock_, monotonic_);
  if (!options_.capture_control_dir.empty()) {
    CaptureIntakeOptions capture;
    capture.control_dir = options_.capture_control_dir;
    capture.hostname = options_.hostname;
    capture.segment_dir = options_.capture_control_dir + "/capture-ready";
    capture.job_uid = [this](const std::string& job) { return JobUid(job); };
    capture_ = std::make_unique<CaptureIntake>(std::move(capture));
  }
  if (options_.py_stacks) {
    py_stacks_ = std::make_unique<PyStacksCollector>(*options_.py_stacks, clock_);
    py_stacks_->Start();
  }
  if (!options_.gres_conf_path.empty()) {
    Result<std::optional<std::string>> text = fs::ReadSmallFile(options_.gres_conf_path, 1 << 20);
    if (text.ok() && text->has_value()) {
      Result<attribution::NodeGres> gres = attribution::ParseGresConf(**text, options_.hostname);
      if (gres.ok()) {
        gres_ = std::move(*gres);
      } else {
        problems_.push_back(options_.gres_conf_path + ": " + gres.status().message());
      }
    } else if (!text.ok()) {
      problems_.push_back(text.status().message());
    }
  }
}

void NodeCollector::TickFast() {
  sampler_->TickFast();
  {
    std::lock_guard lock(buffer_mu_);
    cgroups_.Sample(clock_.NowMs(), options_.hostname, buffer_);
  }
  if (py_stacks_)
    PublishJobsForStacks();
  if (counters_) {
    HoldCountersForStartingTools();
    TickCounters();
  }
  if (counters_ || !options_.phase_b_control_dir.empty())
    Escalate();
  if (dcgm_) {
    std::vector<std::string> uuids;
    for (const gpu::GpuInfo& gpu : sink_.inventory().gpus)
      uuids.push_back(gpu.uuid);
    dcgm_->Tick(uuids, counters_ && counters_->HoldsCounters(), buffer_, buffer_mu_);
  }
}

// The helper samples every GPU NVML lists.
void NodeCollector::TickCounters() {
  std::vector<std::string> uuids;
  for (const gpu::GpuInfo& gpu : sink_.inventory().gpus)
    uuids.push_back(gpu.uuid);
  counters_->Tick(uuids, buffer_, buffer_mu_);
}

// A job whose process starts another CUDA tool gets all its GPUs' counters from that process's
// start, before it has a context for NVML to list (job_cuda_tools.h).
void NodeCollector::HoldCountersForStartingTools() {
  std::map<uint32_t, std::vector<std::string>> gpus_of;
  for (const attribution::JobAllocation& a : AllocationsFromOpen(open_allocations_)) {
    std::vector<std::string>& gpus = gpus_of[a.job.job_id];
    gpus.insert(gpus.end(), a.gpu_uuids.begin(), a.gpu_uuids.end());
  }
  std::map<uint32_t, std::vector<int>> pids;
  {
    std::lock_guard lock(buffer_mu_);
    for (const auto& [job, gpus] : gpus_of) {
      if (!gpus.empty() && cgroups_.jobs().count(job) != 0)
        pids[job] = cgroups_.Pids(job);
    }
  }
  tool_gpus_started_.clear();
  for (uint32_t job : cuda_tools_.Scan(clock_.NowMs(), pids))
    tool_gpus_started_.insert(gpus_of[job].begin(), gpus_of[job].end());
  HoldCountersForTools();
}

void NodeCollector::HoldCountersForTools() {
  std::set<std::string> held = tool_gpus_listed_;
  held.insert(tool_gpus_started_.begin(), tool_gpus_started_.end());
  counters_->HoldFor(held);
}

// GPUs of running jobs that go idle or slow down get the helper's Rich set for a while, and
// their jobs' capture agents record a trace window (Phase B).
void NodeCollector::Escalate() {
  const std::map<std::string, double> sm = sink_.latest_sm_util();
  std::map<std::string, double> allocated;
  std::map<std::string, std::vector<std::string>> jobs_of;
  for (const attribution::JobAllocation& a : AllocationsFromOpen(open_allocations_)) {
    for (const std::string& uuid : a.gpu_uuids) {
      if (auto it = sm.find(uuid); it != sm.end()) {
        allocated[uuid] = it->second;
        jobs_of[uuid].push_back(std::to_string(a.job.job_id));
      }
    }
  }
  const int64_t now = clock_.NowMs();
  for (const Escalation& e : escalation_.Observe(now, allocated)) {
    if (counters_)
      counters_->Escalate(e.uuid, escalation_.window());
    if (options_.phase_b_control_dir.empty())
      continue;
    for (const std::string& job : jobs_of[e.uuid]) {
      const Result<capture::CaptureTrigger> trigger = WritePhaseBTrigger(
          options_.phase_b_control_dir, job, e.reason, e.uuid, now,
          std::chrono::duration_cast<std::chrono::milliseconds>(escalation_.window()));
      const Status written = trigger.status();
      if (written.ok()) {
        if (capture_)  // the segments answering it are taken
          capture_->NoteTrigger(job, trigger->id, static_cast<int64_t>(trigger->until_ms));
        ++phase_b_triggers_;
        phase_b_errors_.clear();  // a cause that comes back is logged again
        continue;
      }
      // Keyed by the kind of failure, not its message: that names the random temporary file
      // of each attempt, and a job can fill the file system the control directory is on.
      const std::string cause =
          std::to_string(static_cast<int>(written.code())) + " " + written.reason();
      if (options_.phase_b_log && phase_b_errors_.size() < 32 &&
          phase_b_errors_.insert(cause).second) {
        options_.phase_b_log("phase B trigger for job " + job + " not written: " +
                             written.message() + " (logged once until a trigger is written)");
      }
    }
  }
}

std::optional<Capability> NodeCollector::CuptiCapability() const {
  if (!counters_)
    return std::nullopt;
  return counters_->Describe();
}

nlohmann::json NodeCollector::CuptiStats() const {
  return counters_ ? counters_->Stats() : nlohmann::json(nullptr);
}

std::optional<Capability> NodeCollector::DcgmCapability() const {
  if (!dcgm_)
    return std::nullopt;
  return dcgm_->Describe();
}

nlohmann::json NodeCollector::DcgmStats() const {
  return dcgm_ ? dcgm_->Stats() : nlohmann::json(nullptr);
}

// Each job with a cgroup on this node, its processes, and whether the GPUs its hooks recorded
// are all idle now (the policy bursts when that turns true).
void NodeCollector::PublishJobsForStacks() {
  const std::map<std::string, double> sm = sink_.latest_sm_util();
  std::map<uint32_t, std::vector<std::string>> gpus_by_job;
  for (const attribution::JobAllocation& a : AllocationsFromOpen(open_allocations_))
    gpus_by_job[a.job.job_id] = a.gpu_uuids;
  std::vector<pystack::JobProcesses> jobs;
  for (const auto& [job, dirs] : cgroups_.jobs()) {
    pystack::JobProcesses entry;
    entry.job_id = std::to_string(job);
    for (int pid : cgroups_.Pids(job, 256))
      entry.pids.push_back(static_cast<pid_t>(pid));
    auto gpus = gpus_by_job.find(job);
    if (gpus != gpus_by_job.end() && !gpus->second.empty()) {
      entry.gpu_allocated = true;
      entry.gpus_idle = std::all_of(gpus->second.begin(), gpus->second.end(), [&](auto& uuid) {
        auto it = sm.find(uuid);
        return it != sm.end() && it->second < options_.idle_sm_util_percent;
      });
    }
    jobs.push_back(std::move(entry));
  }
  py_stacks_->SetJobs(std::move(jobs));
}

std::optional<Capability> NodeCollector::PyStacksCapability() const {
  if (!py_stacks_)
    return std::nullopt;
  return py_stacks_->Describe();
}

Status NodeCollector::RequestStackBurst(const std::string& job_number, int64_t trigger_ms) {
  if (!py_stacks_) {
    return FailedPreconditionError("Python stacks are not collected on this node")
        .WithReason("bursts_off");
  }
  return py_stacks_->RequestBurst(job_number, trigger_ms);
}

nlohmann::json NodeCollector::PyStacksStats() const {
  return py_stacks_ ? py_stacks_->Stats() : nlohmann::json(nullptr);
}

// The file is the daemon's own, but it lives on disk across restarts and upgrades: it is read
// like any outside JSON, and an entry the wire decoder refuses is dropped and reported.
void NodeCollector::LoadOpenAllocations() {
  if (options_.allocations_file.empty())
    return;
  Result<std::optional<std::string>> saved = fs::ReadSmallFile(options_.allocations_file, 16 << 20);
  if (!saved.ok() || !saved->has_value())
    return;
  const std::string& path = options_.allocations_file;
  Result<nlohmann::json> json = wire::ParseJson(**saved, wire::JsonLimits{.max_depth = 4});
  if (!json.ok() || !json->is_object()) {
    problems_.push_back(path + ": not a JSON object; open allocations are forgotten");
    return;
  }
  for (const auto& [key, entries] : json->items()) {
    if (!entries.is_array()) {
      problems_.push_back(path + ": " + key + " must be an array");
      continue;
    }
    std::vector<wire::GpuAllocationRecord>& open = open_allocations_[key];
    for (size_t i = 0; i < entries.size(); ++i) {
      Result<wire::GpuAllocationRecord> allocation =
          wire::DecodeGpuAllocation(entries[i], key + "[" + std::to_string(i) + "]", "bad_record");
      if (allocation.ok())
        open.push_back(*std::move(allocation));
      else
        problems_.push_back(path + ": " + allocation.status().message());
    }
  }
}

namespace {

// A state file replaced whole (never seen half-written), its directory made when missing.
Status WriteStateFile(const std::string& path, const std::string& content) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(dir, 0755));
  return fs::WriteFileAtomically(dir, path.substr(slash + 1), content, 0644);
}

}  // namespace

std::string NodeCollector::ClosesFile() const {
  const std::string& path = options_.allocations_file;
  const size_t slash = path.rfind('/');
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
         "unsent-closes.json";
}

void NodeCollector::KeepUntilCommitted(const std::vector<wire::GpuAllocationRecord>& records) {
  bool added = false;
  size_t not_kept = 0;
  for (const wire::GpuAllocationRecord& a : records) {
    if (a.to_ms == 0)
      continue;  // an opening is derived again from its event
    if (uncommitted_closes_.size() >= kMaxUnsentAllocations) {
      ++not_kept;
      continue;
    }
    added |=
        uncommitted_closes_.emplace(CloseKey(a.job_id, a.host, a.gpu_uuid, a.from_ms, a.to_ms), a)
            .second;
  }
  if (not_kept != 0) {  // one line per event, not per GPU
    problems_.push_back("more than " + std::to_string(kMaxUnsentAllocations) +
                        " closed allocations wait to be handed on: " + std::to_string(not_kept) +
                        " more (job " + records.front().job_id + ") are not kept across a restart");
  }
  if (added)
    SaveUncommittedCloses();
}

void NodeCollector::SaveUncommittedCloses() {
  if (options_.allocations_file.empty())
    return;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [key, a] : uncommitted_closes_)
    entries.push_back(wire::Encode(a));
  if (Status saved = WriteStateFile(ClosesFile(), entries.dump()); !saved.ok())
    problems_.push_back("cannot keep closed allocations not yet handed on: " + saved.message());
}

// Closes a stopped daemon had not handed on: sent at the first collection.
void NodeCollector::LoadUncommittedCloses() {
  if (options_.allocations_file.empty())
    return;
  const std::string path = ClosesFile();
  Result<std::optional<std::string>> saved = fs::ReadSmallFile(path, 64 << 20);
  if (!saved.ok() || !saved->has_value())
    return;
  Result<nlohmann::json> json = wire::ParseJson(**saved, wire::JsonLimits{.max_depth = 3});
  if (!json.ok() || !json->is_array()) {
    problems_.push_back(path + ": not a JSON array; closes not yet handed on are forgotten");
    return;
  }
  for (size_t i = 0; i < json->size() && uncommitted_closes_.size() < kMaxUnsentAllocations; ++i) {
    Result<wire::GpuAllocationRecord> a =
        wire::DecodeGpuAllocation((*json)[i], "[" + std::to_string(i) + "]", "bad_record");
    if (!a.ok() || a->to_ms == 0) {
      problems_.push_back(
          path + ": " +
          (a.ok() ? "[" + std::to_string(i) + "] is not a close" : a.status().message()));
      continue;
    }
    const CloseKey key(a->job_id, a->host, a->gpu_uuid, a->from_ms, a->to_ms);
    uncommitted_closes_.emplace(key, *a);
    unsent_allocations_.emplace(key, *std::move(a));
  }
}

void NodeCollector::SaveOpenAllocations() {
  if (options_.allocations_file.empty())
    return;
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, allocations] : open_allocations_) {
    nlohmann::json& entries = json[key] = nlohmann::json::array();
    for (const wire::GpuAllocationRecord& a : allocations)
      entries.push_back(wire::Encode(a));
  }
  if (Status saved = WriteStateFile(options_.allocations_file, json.dump()); !saved.ok())
    problems_.push_back("cannot keep open allocations: " + saved.message());
}

std::vector<std::string> NodeCollector::TakeProblems() {
  std::vector<std::string> out;
  out.swap(problems_);
  return out;
}

std::vector<wire::GpuAllocationRecord> NodeCollector::AllocationsFor(const JobEvent& event) {
  std::vector<wire::GpuAllocationRecord> out;
  const gpu::Inventory inventory = sink_.inventory();
  // The GPUs SLURM gave the job, from what the hook saw: SLURM_JOB_GPUS (GRES indices, mapped
  // through gres.conf to device minors) and CUDA_VISIBLE_DEVICES (UUIDs, or indices over that
  // GRES list). Never the NVML index, which often differs from both.
  attribution::NodeGpus node{inventory.gpus, gres_, {}};
  attribution::AllocationEvidence evidence;
  evidence.job.display_id = event.job_id;
  evidence.job.job_id = static_cast<uint32_t>(std::strtoul(event.job_id.c_str(), nullptr, 10));
  if (!event.gpus.empty())
    evidence.slurm_job_gpus = event.gpus;
  // In the Prolog and Epilog, slurmd sets CUDA_VISIBLE_DEVICES to the job's GRES indices
  // themselves (a copy of SLURM_JOB_GPUS), not to indices over them as in a task, so the index
  // form adds nothing there and would read as a disagreement; the UUID form is still a check.
  const bool hook_index_copy = !event.gpus.empty() &&
                               event.cuda_visible_devices.find("GPU-") == std::string::npos &&
                               event.cuda_visible_devices.find("MIG-") == std::string::npos;
  if (!event.cuda_visible_devices.empty() && !hook_index_copy)
    evidence.cuda_visible_devices = event.cuda_visible_devices;
  std::vector<const gpu::GpuInfo*> gpus;
  if (evidence.slurm_job_gpus || evidence.cuda_visible_devices) {
    Result<attribution::ResolvedAllocation> resolved =
        attribution::ResolveAllocation(evidence, node);
    if (resolved.ok()) {
      for (const std::string& uuid : resolved->allocation.gpu_uuids) {
        for (const gpu::GpuInfo& g : inventory.gpus) {
          if (g.uuid == uuid)
            gpus.push_back(&g);
        }
      }
      for (const Status& problem : resolved->problems)
        problems_.push_back(problem.message());
    } else {
      problems_.push_back(resolved.status().message());
    }
  }
  const std::string key = event.host + "/" + event.job_id;
  if (gpus.empty() && event.kind == "end") {
    auto open = open_allocations_.find(key);
    if (open == open_allocations_.end())
      return out;
    for (wire::GpuAllocationRecord a : open->second) {
      a.to_ms = std::max(event.at_ms, a.from_ms);  // a clock stepped back between the hooks
      out.push_back(std::move(a));
    }
    open_allocations_.erase(open);
    holders_with_cgroup_.erase(key);
    KeepUntilCommitted(out);
    SaveOpenAllocations();
    return out;
  }
  for (const gpu::GpuInfo* g : gpus) {
    // slurm_job_id is SLURM's number for this job on this node (a het component "17+1" is
    // job 18, as its cgroup says): how the node's own attribution matches processes to the
    // allocation. The server ignores it.
    out.push_back({.job_id = event.job_id,
                   .host = event.host,
                   .gpu_uuid = g->uuid,
                   .gpu_index = g->index,
                   .gpu_minor = g->minor ? static_cast<int64_t>(*g->minor) : -1,
                   .from_ms = event.at_ms,
                   .to_ms = event.kind == "end" ? event.at_ms : 0,
                   .slurm_job_id = static_cast<int64_t>(event.slurm_job_id)});
  }
  if (event.kind == "start") {
    std::vector<wire::GpuAllocationRecord> closed = CloseVanishedHolders(key, event.at_ms, out);
    // The job runs here again (requeued after a crash, so no Epilog closed the first run): the
    // first run is closed at this one's start, before the new run opens (the server then
    // replaces an ended run on a GPU held again instead of counting the time between them).
    std::vector<wire::GpuAllocationRecord> earlier_run;
    // (The same start event read again after a collection was restored is no new run.)
    if (auto earlier = open_allocations_.find(key);
        earlier != open_allocations_.end() &&
        std::any_of(earlier->second.begin(), earlier->second.end(),
                    [&](const auto& a) { return a.from_ms != event.at_ms; })) {
      for (wire::GpuAllocationRecord a : earlier->second) {
        a.to_ms = std::max(event.at_ms, a.from_ms);
        earlier_run.push_back(std::move(a));
      }
      problems_.push_back("job " + event.job_id +
                          " started here again while its earlier run was "
                          "still open (no Epilog ran for it): that run closed at the new start");
    }
    holders_with_cgroup_.erase(key);  // a requeued job's earlier run
    open_allocations_[key] = out;
    out.insert(out.end(), closed.begin(), closed.end());
    out.insert(out.begin(), earlier_run.begin(), earlier_run.end());
  } else {
    // The Epilog's GPUs may be fewer than the Prolog's (one fell off the bus and NVML lists it
    // no more): every allocation the job opened here is closed, not only those it names.
    if (auto open = open_allocations_.find(key); open != open_allocations_.end()) {
      for (wire::GpuAllocationRecord a : open->second) {
        if (std::any_of(out.begin(), out.end(),
                        [&](const auto& closing) { return closing.gpu_uuid == a.gpu_uuid; }))
          continue;
        a.to_ms = std::max(event.at_ms, a.from_ms);
        out.push_back(std::move(a));
      }
    }
    open_allocations_.erase(key);
    holders_with_cgroup_.erase(key);
  }
  KeepUntilCommitted(out);
  SaveOpenAllocations();
  return out;
}

void NodeCollector::NoteHoldersWithCgroups() {
  std::lock_guard lock(buffer_mu_);
  for (const auto& [key, held] : open_allocations_) {
    if (std::any_of(held.begin(), held.end(), [&](const auto& a) {
          return a.slurm_job_id > 0 &&
                 cgroups_.jobs().contains(static_cast<uint32_t>(a.slurm_job_id));
        }))
      holders_with_cgroup_.insert(key);
  }
}

std::set<uint32_t> NodeCollector::JobsWithCgroups() {
  std::set<uint32_t> running;
  std::lock_guard lock(buffer_mu_);
  for (const auto& [job, dirs] : cgroups_.jobs())
    running.insert(job);
  return running;
}

bool NodeCollector::KnownToHaveEnded(const std::string& key,
                                     const std::vector<wire::GpuAllocationRecord>& held,
                                     const std::set<uint32_t>& running,
                                     bool cgroup_gone_is_enough) const {
  // Saved by an older daemon without SLURM's number: not known to have ended.
  return std::all_of(held.begin(), held.end(), [](const auto& a) { return a.slurm_job_id > 0; }) &&
         std::none_of(held.begin(), held.end(),
                      [&](const auto& a) {
                        return running.count(static_cast<uint32_t>(a.slurm_job_id)) != 0;
                      }) &&
         ((cgroup_gone_is_enough && holders_with_cgroup_.contains(key)) ||
          std::all_of(held.begin(), held.end(),
                      [&](const auto& a) { return boot_ms_ && a.from_ms < *boot_ms_; }));
}

std::vector<wire::GpuAllocationRecord> NodeCollector::CloseVanishedHolders(
    const std::string& key, int64_t at_ms, const std::vector<wire::GpuAllocationRecord>& given) {
  // A job whose Epilog never ran here (the node crashed or rebooted in it) stays open in the
  // saved allocations; when SLURM gives one of its GPUs to a new job, it is closed now, or both
  // jobs would be charged for the GPU. Known to have ended: it has no cgroup here, and it
  // started before this boot, or its cgroup was seen and is gone. Having no cgroup is not
  // enough: a job's cgroup appears only with its first step (an salloc with PrologFlags=Alloc
  // may have none for hours), and jobs share GPUs (gres/shard, MPS).
  std::vector<wire::GpuAllocationRecord> out;
  const std::set<uint32_t> running = JobsWithCgroups();
  std::set<std::string> gpus;
  for (const wire::GpuAllocationRecord& a : given)
    gpus.insert(a.gpu_uuid);
  for (auto it = open_allocations_.begin(); it != open_allocations_.end();) {
    const std::vector<wire::GpuAllocationRecord>& held = it->second;
    const bool shares_a_gpu = std::any_of(
        held.begin(), held.end(), [&](const auto& a) { return gpus.count(a.gpu_uuid) != 0; });
    if (it->first == key || !shares_a_gpu ||
        !KnownToHaveEnded(it->first, held, running, /*cgroup_gone_is_enough=*/true)) {
      ++it;
      continue;
    }
    for (wire::GpuAllocationRecord a : held) {
      a.to_ms = std::max(at_ms, a.from_ms);
      out.push_back(std::move(a));
    }
    problems_.push_back("job " + held.front().job_id + " still held " + held.front().gpu_uuid +
                        " without a cgroup here when job " + key.substr(key.find('/') + 1) +
                        " was given it: closed (its Epilog never ran here)");
    holders_with_cgroup_.erase(it->first);
    it = open_allocations_.erase(it);
  }
  return out;
}

NodeCollection NodeCollector::Collect(bool final) {
  NodeCollection c;
  c.stacks = std::move(unsent_stacks_);
  unsent_stacks_.clear();
  for (auto& [key, record] : unsent_allocations_)
    c.allocations.push_back(std::move(record));
  unsent_allocations_.clear();
  if (py_stacks_) {
    for (auto& entry : py_stacks_->TakeStacks(final))
      c.stacks.push_back(std::move(entry));
  }
  NoteHoldersWithCgroups();
  PendingEvents pending = ReadJobEvents(options_.events_dir, options_.max_events_per_collection);
  for (auto& [file, event] : pending.events) {
    if (!in_flight_.insert(file).second)
      continue;
    for (auto& allocation : AllocationsFor(event))
      c.allocations.push_back(std::move(allocation));
    if (event.kind == "start" && event.slurm_job_id != 0 && !event.user.empty()) {
      // Kept after the job ends: its processes' last windows arrive after the Epilog.
      if (job_users_.size() >= 10'000)
        job_users_.erase(job_users_.begin());
      job_users_[std::to_string(event.slurm_job_id)] = event.user;
    }
    if (event.kind == "start") {
      std::lock_guard lock(buffer_mu_);
      // The new job's cgroup: read it from the next sample on, or as soon as slurmstepd makes it.
      if (event.slurm_job_id != 0)
        cgroups_.ExpectJob(event.slurm_job_id);
      else
        cgroups_.RequestRescan();
    }
    c.event_files.push_back(file);
    c.events.push_back(std::move(event));
  }
  bad_event_files_ = std::move(pending.bad);
  // Each GPU's records in the order its runs happened, also with closes kept from a failed
  // hand-off in front: a requeued run's opening [T,0) must reach the server before a close
  // [T,U) or [U,U] of that run, or the server widens the earlier run's row over the gap
  // instead of starting the new run (store/sqlite_store_job_hosts.cc). Openings go before
  // closes that start with them.
  std::stable_sort(c.allocations.begin(), c.allocations.end(), [](const auto& a, const auto& b) {
    return std::pair(a.from_ms, a.to_ms != 0) < std::pair(b.from_ms, b.to_ms != 0);
  });
  if (capture_) {
    CaptureScan scan = capture_->Scan(clock_.NowMs());
    for (size_t i = 0; i < scan.aggregates.size() && i < scan.aggregate_files.size(); ++i) {
      if (!captures_in_flight_.insert(scan.aggregate_files[i]).second)
        continue;
      c.captures.push_back(std::move(scan.aggregates[i]));
      c.capture_files.push_back(std::move(scan.aggregate_files[i]));
    }
  }

  // After the events, so a job that started since the last collection is already allocated.
  // A holder left open by a crash (from before this boot, no cgroup) holds no GPU any more:
  // left in, it would make the GPU's next job look like one sharing it (gpu.allocated_jobs).
  // A cgroup seen and gone is not enough here: an salloc's job cgroup may go between two
  // steps, and the job would then be judged on its neighbours' kernels.
  std::map<std::string, std::vector<wire::GpuAllocationRecord>> holding;
  {
    const std::set<uint32_t> running = JobsWithCgroups();
    for (const auto& [key, held] : open_allocations_) {
      if (!KnownToHaveEnded(key, held, running, /*cgroup_gone_is_enough=*/false))
        holding.emplace(key, held);
    }
  }
  // Processes NVML could not list are unknown: no "no process" series are made of them.
  const std::optional<std::vector<gpu::GpuProcess>> processes = sink_.processes();
  const GpuUseResult use =
      ComputeGpuUse(sink_.inventory().gpus, processes.value_or(std::vector<gpu::GpuProcess>{}),
                    AllocationsFromOpen(holding), options_.attribution);
  // Without the processes a GPU's state (busy, allocated_idle) is not known: no view, which the
  // server counts as unknown.
  gpu_use_ = processes ? GpuUseToJson(use.view) : nlohmann::json::array();
  std::map<uint32_t, telemetry::JobCgroups::JobDirs> job_dirs;
  {
    std::lock_guard lock(buffer_mu_);
    job_dirs = cgroups_.jobs();
  }
  job_devices_ = JobDevicesToJson(
      CheckJobDevices(open_allocations_, job_dirs,
                      attribution::NodeGpus{sink_.inventory().gpus, gres_, {}}, clock_.NowMs()));
  if (counters_ && processes) {  // unknown: the helper keeps what it holds back
    // A process running another CUDA tool (Nsight, a CUPTI profiler) gets its GPU's counters,
    // whichever job it is of (a process outside any job's cgroup too).
    tool_gpus_listed_.clear();
    for (const attribution::GpuUse& gpu : use.view.gpus) {
      for (const attribution::GpuProcessUse& p : gpu.processes) {
        if (p.process.cuda_tool)
          tool_gpus_listed_.insert(gpu.uuid);
      }
    }
    HoldCountersForTools();
  }
  std::lock_guard lock(buffer_mu_);
  AddGpuUseSeries(use.view, options_.hostname, clock_.NowMs(), buffer_, processes.has_value());
  c.samples = buffer_.samples();
  c.series = buffer_.Take();
  return c;
}

nlohmann::json NodeCollector::CaptureStats() const {
  if (!capture_)
    return nullptr;
  return {{"phase_b_triggers", phase_b_triggers_},
          {"refused", capture_->refused()},
          {"segments_dropped", capture_->segments_dropped()},
          {"problems", capture_->problems()}};
}

std::optional<uid_t> NodeCollector::JobUid(const std::string& job_number) {
  auto it = job_users_.find(job_number);
  if (it == job_users_.end())
    return JobUidOfProcesses(job_number);
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(it->second.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr)
    return std::nullopt;
  return found->pw_uid;
}

std::optional<uid_t> NodeCollector::JobUidOfProcesses(const std::string& job_number) {
  // A job that started before this daemon did (a restart, an upgrade): its start event was
  // committed by the daemon before, so its user is read from its cgroup's processes instead.
  // Only root can move a process into a job's cgroup, so they are the job's user's (and
  // slurmstepd's, root's: another owner wins over root). Once per job.
  if (auto known = uids_of_processes_.find(job_number); known != uids_of_processes_.end())
    return known->second;
  uint32_t job = 0;
  const char* end = job_number.data() + job_number.size();
  // Only the canonical spelling: "07" is no job's number, though it parses as 7.
  if (job_number.empty() || std::from_chars(job_number.data(), end, job).ptr != end ||
      std::to_string(job) != job_number)
    return std::nullopt;
  std::vector<int> pids;
  {
    std::lock_guard lock(buffer_mu_);
    if (cgroups_.jobs().count(job) == 0)
      return std::nullopt;
    pids = cgroups_.Pids(job, 64);
  }
  std::map<uid_t, size_t> owners;
  for (int pid : pids) {
    struct stat st {};
    if (stat((options_.attribution.proc_root + "/" + std::to_string(pid)).c_str(), &st) == 0)
      ++owners[st.st_uid];
  }
  std::optional<uid_t> uid;  // the owner of most processes, root only when no one else
  size_t most = 0;
  for (const auto& [owner, count] : owners) {
    if (owner != 0 && count > most) {
      uid = owner;
      most = count;
    }
  }
  if (!uid && owners.count(0) != 0)
    uid = 0;
  if (!uid)
    return std::nullopt;
  if (uids_of_processes_.size() >= 10'000)
    uids_of_processes_.clear();
  uids_of_processes_[job_number] = *uid;
  return uid;
}

void NodeCollector::Commit(const NodeCollection& collection) {
  if (capture_)
    capture_->Commit(
        CaptureScan{.aggregates = {}, .aggregate_files = collection.capture_files, .segments = {}});
  for (const std::string& file : collection.event_files) {
    unlink((options_.events_dir + "/" + file).c_str());
    in_flight_.erase(file);
  }
  for (const std::string& file : collection.capture_files)
    captures_in_flight_.erase(file);
  size_t handed_on = 0;
  for (const wire::GpuAllocationRecord& a : collection.allocations) {
    if (a.to_ms != 0)
      handed_on +=
          uncommitted_closes_.erase(CloseKey(a.job_id, a.host, a.gpu_uuid, a.from_ms, a.to_ms));
  }
  if (handed_on != 0)
    SaveUncommittedCloses();
  for (const std::string& file : bad_event_files_) {
    unlink((options_.events_dir + "/" + file).c_str());
  }
  bad_event_files_.clear();
}

void NodeCollector::Restore(const NodeCollection& collection) {
  // Put the samples back so the next collection carries them; the buffer's cap and time-order
  // rule still apply, so an outage long enough to fill it drops (and counts) the newest.
  for (const std::string& file : collection.event_files)
    in_flight_.erase(file);
  for (const std::string& file : collection.capture_files)
    captures_in_flight_.erase(file);
  for (const auto& entry : collection.stacks) {
    if (unsent_stacks_.size() >= kMaxUnsentStacks)
      break;  // a long outage of the spool: the oldest windows are what is kept
    unsent_stacks_.push_back(entry);
  }
  // Closes are sent again first: an event read again does not derive them again (an Epilog
  // closed the open allocations it came from). Openings are derived again from their events,
  // so they are not kept (kept, each failed hand-off would add another copy), and a close is
  // kept once.
  for (const wire::GpuAllocationRecord& a : collection.allocations) {
    if (a.to_ms == 0 || unsent_allocations_.size() >= kMaxUnsentAllocations)
      continue;
    unsent_allocations_.emplace(CloseKey(a.job_id, a.host, a.gpu_uuid, a.from_ms, a.to_ms), a);
  }
  std::lock_guard lock(buffer_mu_);
  for (const wire::SeriesRecord& s : collection.series) {
    const telemetry::SeriesKey key{s.host, s.device, s.metric};
    int64_t t = s.t0;
    for (size_t i = 0; i < s.dt.size() && i < s.v.size(); ++i) {
      t += s.dt[i];
      buffer_.Add(key, t, s.v[i]);
    }
  }
}

}  // namespace expanse::agent
