// NodeCollector: what one node contributes, whatever its role — the GPU sampler's series and
// the job events its SLURM hooks recorded (with the GPU allocations they imply). A worker's
// sampler writes a collection to the shared spool; the controller puts its own host's straight
// into the outbox. Either way the hook event files are deleted only after Commit, i.e. once the
// collection is safely handed on, so a failure anywhere in between loses nothing.
#ifndef EXPANSE_AGENT_NODE_COLLECTOR_H_
#define EXPANSE_AGENT_NODE_COLLECTOR_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/capture_intake.h"
#include "agent/counter_helper.h"
#include "agent/dcgm_enricher.h"
#include "agent/escalation_policy.h"
#include "agent/job_cuda_tools.h"
#include "agent/job_events.h"
#include "agent/py_stacks.h"
#include "attribution/gres_conf.h"
#include "attribution/process_attribution.h"
#include "core/clock.h"
#include "gpu/backend_select.h"
#include "gpu/sampler.h"
#include "telemetry/gpu_series_sink.h"
#include "telemetry/job_cgroups.h"
#include "telemetry/series_buffer.h"
#include "wire/records.h"

namespace expanse::agent {

struct NodeCollectorOptions {
  std::string hostname;
  gpu::BackendChoice backend;
  std::chrono::milliseconds call_timeout{std::chrono::seconds(5)};
  std::string events_dir = kDefaultEventsDir;
  // Local file keeping the allocations of jobs still running on this node, so an Epilog after a
  // daemon restart still closes them; "" = in memory only.
  std::string allocations_file;
  // This node's gres.conf, which maps SLURM's GRES indices to /dev/nvidiaN; "" = none.
  std::string gres_conf_path;
  size_t max_events_per_collection = 5'000;
  telemetry::JobCgroupOptions cgroups;
  attribution::AttributionOptions attribution;  // where /proc is (tests point it elsewhere)
  // Python stacks of the node's job processes; unset: not collected (hooks, tests).
  std::optional<PyStacksOptions> py_stacks;
  // A job's GPUs count as idle for stack bursts below this SM utilisation (percent).
  double idle_sm_util_percent = 5.0;
  // Hardware counters from expanse-cupti-helper; unset: not collected (EXPANSE_CUPTI_ENABLE=0,
  // hooks, tests).
  std::optional<CounterHelperOptions> counters;
  // Health and interconnect telemetry (and DCP fields) through the operator's dcgmi; unset: not
  // collected (no dcgmi found, hooks, tests).
  std::optional<DcgmEnricherOptions> dcgm;
  // Phase B: escalations also ask the job's capture agents for a trace window, through
  // <phase_b_control_dir>/phase-b/<job id> (phase_b_triggers.h); "" = not (the agent or
  // escalation is off). A trigger that cannot be written goes to `phase_b_log`, once per cause.
  std::string phase_b_control_dir;
  std::function<void(const std::string&)> phase_b_log;
  // The capture agents' spool (<capture_control_dir>/capture, capture_intake.h), read at each
  // collection; "" = not (in-process capture off).
  std::string capture_control_dir;
};

// One collection, ready to hand on.
struct NodeCollection {
  std::vector<wire::SeriesRecord> series;
  std::vector<wire::StackRecord> stacks;               // closed windows
  std::vector<wire::CaptureAggregateRecord> captures;  // the capture agents' windows
  std::vector<std::string> capture_files;              // to delete on Commit
  std::vector<JobEvent> events;
  std::vector<wire::GpuAllocationRecord> allocations;
  std::vector<std::string> event_files;  // to delete on Commit
  size_t samples = 0;
  bool empty() const {
    return series.empty() && events.empty() && allocations.empty() && stacks.empty() &&
           captures.empty();
  }
};

class NodeCollector {
 public:
  NodeCollector(NodeCollectorOptions options, Clock& clock);

  // GPU readings, then the jobs' cgroup CPU and memory and the node's CPU.
  void TickFast();
  void TickSlow() { sampler_->TickSlow(); }
  gpu::SamplerHealth GpuHealth() const { return sampler_->Health(); }
  gpu::Inventory Inventory() const { return sink_.inventory(); }
  // The per-GPU use view as of the last Collect (agent/gpu_use.h), for the health report and
  // the heartbeat; an empty array before the first.
  const nlohmann::json& GpuUse() const { return gpu_use_; }
  // The attribution self-check of the last Collect (agent/job_devices_check.h).
  const nlohmann::json& JobDevices() const { return job_devices_; }
  // The py_stacks capability, when stacks are collected; nullopt otherwise.
  std::optional<Capability> PyStacksCapability() const;
  nlohmann::json PyStacksStats() const;
  // The cupti capability and the helper's counts, when counters are collected.
  std::optional<Capability> CuptiCapability() const;
  nlohmann::json CuptiStats() const;
  // Phase B trace windows asked of capture agents so far.
  uint64_t PhaseBTriggers() const { return phase_b_triggers_; }
  // The capture spool's intake, when in-process capture is on: Phase B triggers written,
  // refusals by reason, segments dropped for space, the latest problems; null when off.
  nlohmann::json CaptureStats() const;
  // The dcgm capability and the enrichment's counts, when dcgmi is used.
  std::optional<Capability> DcgmCapability() const;
  nlohmann::json DcgmStats() const;
  // A live stack burst the controller asked for (PyStacksCollector::RequestBurst): the job by
  // SLURM's number when the request has it, else by its id. kFailedPrecondition reason
  // "bursts_off" when stacks are not collected here.
  Status RequestStackBurst(const std::string& job_number, int64_t trigger_ms);

  // Problems met resolving job allocations (a gres.conf that does not parse, sources that
  // disagree), newest last, for the daemon's log and health.
  std::vector<std::string> TakeProblems();

  // Takes the buffered series and the pending hook events not already in an earlier collection
  // that is neither committed nor restored.
  // `final`: the daemon is stopping, so stack windows still open are taken too.
  NodeCollection Collect(bool final = false);
  // The collection reached durable storage: delete its event files (and malformed ones).
  void Commit(const NodeCollection& collection);
  // The collection could not be handed on: its series go back into the buffer and its events
  // become collectable again, so the next collection carries both. Call it before the next
  // TickFast (the buffer only takes samples in time order).
  void Restore(const NodeCollection& collection);

 private:
  std::vector<wire::GpuAllocationRecord> AllocationsFor(const JobEvent& event);
  void LoadOpenAllocations();
  // Closes the open allocations of jobs known to have ended (no cgroup here, and started before
  // this boot or their cgroup seen and gone) that hold one of the GPUs `given` to the job of
  // `key`; returns their closing records.
  std::vector<wire::GpuAllocationRecord> CloseVanishedHolders(
      const std::string& key, int64_t at_ms, const std::vector<wire::GpuAllocationRecord>& given);

  NodeCollectorOptions options_;
  Clock& clock_;
  std::mutex buffer_mu_;
  telemetry::SeriesBuffer buffer_;
  telemetry::GpuSeriesSink sink_;
  std::unique_ptr<gpu::Sampler> sampler_;
  std::vector<std::string> bad_event_files_;
  std::vector<std::string> problems_;
  std::set<std::string> in_flight_;  // event files collected, not yet committed or restored
  // Capture aggregate files in a collection neither committed nor restored: a later scan reads
  // them again (they are deleted on Commit only) and must not send them twice.
  std::set<std::string> captures_in_flight_;
  // Allocations opened by a start event, so the end event closes the same GPUs even when the
  // Epilog's environment does not name them (kept in options.allocations_file).
  void SaveOpenAllocations();
  std::map<std::string, std::vector<wire::GpuAllocationRecord>> open_allocations_;
  attribution::NodeGres gres_;
  nlohmann::json gpu_use_ = nlohmann::json::array();
  nlohmann::json job_devices_ = nlohmann::json::array();
  void PublishJobsForStacks();
  std::unique_ptr<PyStacksCollector> py_stacks_;
  void TickCounters();
  // The helper lets go of the GPUs of processes running another CUDA tool: those NVML lists (at
  // each collection) and, from their start, every GPU of a job with such a process in its cgroup
  // (at each fast tick).
  void HoldCountersForStartingTools();
  void HoldCountersForTools();
  std::set<std::string> tool_gpus_listed_;
  std::set<std::string> tool_gpus_started_;
  MonotonicClock monotonic_;  // the helper's restarts and silence, immune to clock steps
  std::unique_ptr<CounterHelper> counters_;
  std::unique_ptr<DcgmEnricher> dcgm_;
  EscalationPolicy escalation_;
  void Escalate();
  uint64_t phase_b_triggers_ = 0;
  std::unique_ptr<CaptureIntake> capture_;
  // SLURM's job number -> the job's user, from start events (bounded): who may spool for it.
  std::map<std::string, std::string> job_users_;
  std::optional<uid_t> JobUid(const std::string& job_number);
  std::optional<uid_t> JobUidOfProcesses(const std::string& job_number);
  std::map<std::string, uid_t> uids_of_processes_;  // jobs whose start event this daemon missed
  std::set<std::string> phase_b_errors_;  // kinds of failure logged since the last trigger
  // Stack entries of a collection that could not be handed on: their windows are closed in the
  // aggregator, so they wait here for the next collection (bounded).
  std::vector<wire::StackRecord> unsent_stacks_;
  // A closing allocation record by job, host, GPU, from, to (so a job's runs go in order).
  using CloseKey = std::tuple<std::string, std::string, std::string, int64_t, int64_t>;
  // The closing allocation records of such collections, each once (bounded): sent again at
  // the next collection.
  std::map<CloseKey, wire::GpuAllocationRecord> unsent_allocations_;
  // Every close derived and not yet handed on for good (Commit), kept on disk beside the open
  // allocations (unsent-closes.json): an event read again after a restart does not derive
  // it again (its open allocation is gone), so a daemon stopped or killed between Collect and
  // the hand-off would lose it. Written before the open allocations it came from leave
  // open-allocations.json, so a crash between the two writes loses neither (a close sent
  // twice is harmless).
  std::map<CloseKey, wire::GpuAllocationRecord> uncommitted_closes_;
  void KeepUntilCommitted(const std::vector<wire::GpuAllocationRecord>& records);
  void SaveUncommittedCloses();
  void LoadUncommittedCloses();
  std::string ClosesFile() const;
  telemetry::JobCgroups cgroups_;
  JobCudaTools cuda_tools_;
  std::optional<int64_t> boot_ms_;  // when the node booted (/proc/stat btime)
  // Open allocations whose job's cgroup has been seen by this daemon.
  void NoteHoldersWithCgroups();
  // The jobs with a cgroup here now.
  std::set<uint32_t> JobsWithCgroups();
  // Whether the open allocation `key` is of a job known to have ended (its Epilog never ran, or
  // not yet): it has no cgroup here, and it started before this boot, or (where
  // `cgroup_gone_is_enough`) its cgroup was seen and is gone. Having no cgroup is not enough
  // (see CloseVanishedHolders).
  bool KnownToHaveEnded(const std::string& key, const std::vector<wire::GpuAllocationRecord>& held,
                        const std::set<uint32_t>& running, bool cgroup_gone_is_enough) const;
  std::set<std::string> holders_with_cgroup_;
  std::string gres_problem_;  // why gres.conf could not be used, for the log
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_NODE_COLLECTOR_H_
