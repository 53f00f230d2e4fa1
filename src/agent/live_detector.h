// Live detection on the controller (docs/pystacks.md, "Live bursts"): while a job runs, flags
// it when one of its GPUs has been spinning (stuck: utilisation high, no work done) or when all
// of them have had nothing of the job running (no_process) for longer than a threshold, so the
// controller can ask every node of the job for a stack burst at the same moment.
//
// Pure and fed by the controller's round: the GPU allocations and the series it passes on (a
// worker's spool file, or its own host's collection), one flush at a time. Each flush of a GPU
// is one cell, classified by the rule the server's verdicts use (wire/gpu_cell_state.h), and
// consecutive cells in one state form a run; a cell without samples neither extends nor ends a
// run. One trigger per job and episode: the episode ends only after the job has been out of
// its state for rearm_after_ms (hysteresis), so a job flapping around the rule is not asked for
// a burst every round. A GPU SLURM shares (gres/shard, MPS) has a track per job, each judged
// with its own job's processes (wire/gpu_cell_state.h, "shared"). Memory is bounded: a track is
// forgotten when its allocation ends, when its job is no longer running in SLURM (which also
// ends a track whose Epilog was missed), or when nothing of it has arrived for forget_after_ms;
// at most max_gpus tracks are kept (more are refused and counted).
//
// Two clocks, kept apart: runs are measured in sample time (one GPU's samples come from one
// host's clock, so a skewed worker still measures its own runs right), while silence is
// measured in the controller's time of arrival (`now_ms`). A worker whose clock runs hours
// ahead, or a record with a far-future t0, therefore cannot make other hosts' GPUs look silent.
//
// Not thread-safe: the controller's round owns one.
#ifndef EXPANSE_AGENT_LIVE_DETECTOR_H_
#define EXPANSE_AGENT_LIVE_DETECTOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "wire/gpu_cell_state.h"
#include "wire/records.h"

namespace expanse::agent {

struct LiveDetectorOptions {
  int64_t stuck_after_ms = 600'000;       // EXPANSE_LIVE_STUCK_AFTER_S
  int64_t no_process_after_ms = 600'000;  // EXPANSE_LIVE_NO_PROCESS_AFTER_S
  int64_t rearm_after_ms = 60'000;        // out of the state this long ends an episode
  int64_t forget_after_ms = 3'600'000;    // a GPU silent this long (controller time) is forgotten
  size_t max_gpus = 65'536;               // tracks: a shared GPU counts once per job
  wire::GpuCellThresholds cell;
};

struct LiveTrigger {
  std::string job_id;              // as squeue and the server name it ("123_4")
  int64_t slurm_job_id = 0;        // SLURM's number on the nodes (their cgroups); 0 when unknown
  std::string reason;              // "stuck" or "no_process"
  int64_t since_ms = 0;            // the start of the run that passed the threshold (sample time)
  int64_t through_ms = 0;          // the last sample of that run
  std::vector<std::string> hosts;  // every host the job has GPUs on, sorted
  std::vector<std::string> gpus;   // the GPUs in that state, sorted
};

struct LiveDetectorStats {
  uint64_t cells = 0;           // GPU cells classified
  uint64_t triggers = 0;        // episodes flagged
  uint64_t gpus_refused = 0;    // allocations not tracked: max_gpus reached
  uint64_t gpus_forgotten = 0;  // tracks dropped (allocation ended, job gone, silent)
};

class LiveDetector {
 public:
  explicit LiveDetector(LiveDetectorOptions options = {});

  // A GPU allocation as the ingest batch carries it (after the controller's renaming): opens
  // the GPU's track for its job (beside other jobs' tracks of it: SLURM may share a GPU), or
  // (to_ms set) forgets it. `now_ms`: the controller's clock.
  void NoteAllocation(const wire::GpuAllocationRecord& allocation, int64_t now_ms);
  // The series of one flush: gpu.sm_util, gpu.power_w, gpu.processes, gpu.sm_active,
  // gpu.dcgm.sm_active, gpu.allocated_jobs of allocated GPUs and job.gpu_processes of their
  // jobs; anything else is ignored. Each GPU with data in it gets one cell per track, and its
  // tracks count as heard from at `now_ms`.
  void NoteSeries(const std::vector<wire::SeriesRecord>& series, int64_t now_ms);
  // The jobs SLURM runs now (squeue's RUNNING, SUSPENDED and COMPLETING jobs): every other
  // job's GPUs are forgotten.
  void KeepOnlyJobs(const std::set<std::string>& running);
  // Jobs that newly passed a threshold since the last call: one per job and episode. Also
  // forgets GPUs nothing has arrived of for forget_after_ms before `now_ms`.
  std::vector<LiveTrigger> TakeTriggers(int64_t now_ms);

  const LiveDetectorStats& stats() const { return stats_; }
  size_t tracked_gpus() const { return gpus_.size(); }  // tracks
  size_t tracked_jobs() const { return jobs_.size(); }

 private:
  // One job's track of one GPU; a GPU's tracks are neighbours in the map.
  struct GpuKey {
    std::string host;
    std::string uuid;
    std::string job_id;
    auto operator<=>(const GpuKey&) const = default;
  };
  struct Run {
    wire::GpuCellState state = wire::GpuCellState::kUnknown;
    int64_t since_ms = 0;
    int64_t through_ms = 0;
  };
  struct GpuTrack {
    int64_t slurm_job_id = 0;
    double peak_power_w = -1;
    Run run;
    int64_t last_heard_ms = 0;  // controller time of the allocation or the last cell
  };
  struct Episode {
    bool active = false;
    std::string reason;
    int64_t clear_since_ms = 0;  // out of the state since (data time); 0 while in it
  };

  void ForgetGpu(std::map<GpuKey, GpuTrack>::iterator it);
  // Whether any job's track is of the GPU.
  bool Tracked(const std::string& host, const std::string& uuid) const;
  void Evaluate(const std::string& job_id, std::vector<LiveTrigger>& out);

  LiveDetectorOptions options_;
  std::map<GpuKey, GpuTrack> gpus_;
  std::map<std::string, std::set<GpuKey>> gpus_by_job_;
  std::map<std::string, Episode> jobs_;
  std::set<std::string> changed_jobs_;  // jobs with new cells since TakeTriggers
  LiveDetectorStats stats_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_LIVE_DETECTOR_H_
