#include "agent/live_detector.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace expanse::agent {
namespace {

using wire::GpuCellState;

// One GPU's readings over one flush, before classification.
struct CellSums {
  uint32_t util_n = 0;
  double util_sum = 0;
  double util_max = 0;
  uint32_t power_n = 0;
  double power_sum = 0;
  uint32_t cupti_n = 0;
  double cupti_sum = 0;
  uint32_t dcgm_n = 0;
  double dcgm_sum = 0;
  double processes = -1;
  double allocated_jobs = -1;
  int64_t first_ms = 0;
  int64_t last_ms = 0;
  bool any = false;
};

constexpr std::string_view kJobDevicePrefix = "job/";

// Calls f(t, v) for every sample of a series.
template <typename F>
void ForEachSample(const wire::SeriesRecord& s, F f) {
  int64_t t = s.t0;
  for (size_t i = 0; i < s.v.size() && i < s.dt.size(); ++i) {
    t += s.dt[i];
    f(t, s.v[i]);
  }
}

void NoteTimes(CellSums& c, const wire::SeriesRecord& s) {
  ForEachSample(s, [&](int64_t t, double) {
    c.first_ms = c.any ? std::min(c.first_ms, t) : t;
    c.last_ms = c.any ? std::max(c.last_ms, t) : t;
    c.any = true;
  });
}

}  // namespace

LiveDetector::LiveDetector(LiveDetectorOptions options) : options_(options) {}

void LiveDetector::NoteAllocation(const wire::GpuAllocationRecord& a, int64_t now_ms) {
  const GpuKey key{a.host, a.gpu_uuid, a.job_id};
  auto it = gpus_.find(key);
  if (a.to_ms > 0) {
    if (it != gpus_.end())
      ForgetGpu(it);
    return;
  }
  if (it != gpus_.end()) {
    if (it->second.slurm_job_id == 0)
      it->second.slurm_job_id = a.slurm_job_id;
    it->second.last_heard_ms = std::max(it->second.last_heard_ms, now_ms);
    return;
  }
  // Another job's track of the GPU stays: SLURM shares GPUs (gres/shard, MPS), and a job
  // whose Epilog was missed goes when it leaves squeue (KeepOnlyJobs).
  if (gpus_.size() >= options_.max_gpus) {
    ++stats_.gpus_refused;
    return;
  }
  GpuTrack track;
  track.slurm_job_id = a.slurm_job_id;
  track.last_heard_ms = now_ms;
  gpus_.emplace(key, std::move(track));
  gpus_by_job_[a.job_id].insert(key);
  jobs_.try_emplace(a.job_id);
}

void LiveDetector::ForgetGpu(std::map<GpuKey, GpuTrack>::iterator it) {
  const std::string job = it->first.job_id;
  auto by_job = gpus_by_job_.find(job);
  if (by_job != gpus_by_job_.end()) {
    by_job->second.erase(it->first);
    if (by_job->second.empty()) {
      gpus_by_job_.erase(by_job);
      jobs_.erase(job);
      changed_jobs_.erase(job);
    }
  }
  gpus_.erase(it);
  ++stats_.gpus_forgotten;
}

bool LiveDetector::Tracked(const std::string& host, const std::string& uuid) const {
  const auto it = gpus_.lower_bound({host, uuid, ""});
  return it != gpus_.end() && it->first.host == host && it->first.uuid == uuid;
}

void LiveDetector::NoteSeries(const std::vector<wire::SeriesRecord>& series, int64_t now_ms) {
  // (host, uuid) -> the GPU's readings in this flush, shared by its tracks.
  std::map<std::pair<std::string, std::string>, CellSums> cells;
  // (host, job) -> peak of job.gpu_processes in this flush, and its sample times.
  std::map<std::pair<std::string, std::string>, CellSums> job_processes;
  for (const wire::SeriesRecord& s : series) {
    if (s.device.starts_with(kJobDevicePrefix)) {
      if (s.metric != "job.gpu_processes")
        continue;
      const std::string job = s.device.substr(kJobDevicePrefix.size());
      if (!gpus_by_job_.contains(job))
        continue;
      CellSums& c = job_processes[{s.host, job}];
      ForEachSample(s, [&](int64_t, double v) { c.processes = std::max(c.processes, v); });
      NoteTimes(c, s);
      continue;
    }
    if (!Tracked(s.host, s.device))
      continue;  // not allocated to a job we know: nothing to flag
    CellSums& c = cells[{s.host, s.device}];
    if (s.metric == "gpu.sm_util") {
      ForEachSample(s, [&](int64_t, double v) {
        ++c.util_n;
        c.util_sum += v;
        c.util_max = c.util_n == 1 ? v : std::max(c.util_max, v);
      });
    } else if (s.metric == "gpu.power_w") {
      ForEachSample(s, [&](int64_t, double v) {
        ++c.power_n;
        c.power_sum += v;
      });
    } else if (s.metric == "gpu.processes") {
      ForEachSample(s, [&](int64_t, double v) { c.processes = std::max(c.processes, v); });
    } else if (s.metric == "gpu.allocated_jobs") {
      ForEachSample(s,
                    [&](int64_t, double v) { c.allocated_jobs = std::max(c.allocated_jobs, v); });
    } else if (s.metric == "gpu.sm_active") {
      ForEachSample(s, [&](int64_t, double v) {
        ++c.cupti_n;
        c.cupti_sum += v;
      });
    } else if (s.metric == "gpu.dcgm.sm_active") {
      ForEachSample(s, [&](int64_t, double v) {
        ++c.dcgm_n;
        c.dcgm_sum += v;
      });
    } else {
      continue;
    }
    NoteTimes(c, s);
  }
  // A GPU with no series of its own in this flush still gets a cell when its job reported
  // no process on its host (an allocated GPU nothing touches may not be sampled at all).
  for (const auto& [host_job, c] : job_processes) {
    for (const GpuKey& key : gpus_by_job_[host_job.second]) {
      if (key.host == host_job.first && c.processes == 0)
        cells.try_emplace({key.host, key.uuid});
    }
  }

  for (const auto& [gpu, c] : cells) {
    const auto first_track = gpus_.lower_bound({gpu.first, gpu.second, ""});
    auto of_gpu = [&](auto it) {
      return it != gpus_.end() && it->first.host == gpu.first && it->first.uuid == gpu.second;
    };
    double tracks = 0;
    for (auto it = first_track; of_gpu(it); ++it)
      ++tracks;
    // Each job's track of the GPU, judged with that job's own processes.
    for (auto it = first_track; of_gpu(it); ++it) {
      const GpuKey& key = it->first;
      GpuTrack& track = it->second;
      const auto jp = job_processes.find({key.host, key.job_id});
      // More tracks than jobs the node says hold the GPU, and nothing of this one's job: its
      // end was missed (the GPU went to another job). Not judged on the new job's readings, nor
      // heard from, so it goes after forget_after_ms if squeue does not end it first.
      if (c.allocated_jobs >= 0 && tracks > c.allocated_jobs && jp == job_processes.end())
        continue;
      wire::GpuCellReadings r;
      r.samples = c.util_n;
      r.util_mean = c.util_n > 0 ? c.util_sum / c.util_n : 0;
      r.util_max = c.util_max;
      r.power_mean = c.power_n > 0 ? c.power_sum / c.power_n : -1;
      r.sm_active =
          c.cupti_n > 0 ? c.cupti_sum / c.cupti_n : (c.dcgm_n > 0 ? c.dcgm_sum / c.dcgm_n : -1);
      r.processes = c.processes;
      r.allocated_jobs = c.allocated_jobs;
      int64_t first = c.first_ms, last = c.last_ms;
      bool any = c.any;
      if (jp != job_processes.end()) {
        r.job_processes = jp->second.processes;
        if (jp->second.any) {
          first = any ? std::min(first, jp->second.first_ms) : jp->second.first_ms;
          last = any ? std::max(last, jp->second.last_ms) : jp->second.last_ms;
          any = true;
        }
      }
      if (!any)
        continue;  // no sample time at all: nothing to place the cell at
      // The GPU's own peak so far is the reference for "near idle power", as the verdicts use
      // the peak over the job; it includes this cell (a GPU never busier is not near idle).
      if (r.power_mean >= 0)
        track.peak_power_w = std::max(track.peak_power_w, r.power_mean);
      const GpuCellState state = wire::ClassifyGpuCell(r, track.peak_power_w, options_.cell);
      ++stats_.cells;
      track.last_heard_ms = std::max(track.last_heard_ms, now_ms);
      changed_jobs_.insert(key.job_id);
      if (state == GpuCellState::kUnknown)
        continue;  // a gap neither extends nor ends a run
      if (state == track.run.state && first >= track.run.since_ms) {
        track.run.through_ms = std::max(track.run.through_ms, last);
      } else {
        track.run = {state, first, last};
      }
    }
  }
}

void LiveDetector::KeepOnlyJobs(const std::set<std::string>& running) {
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    auto next = std::next(it);
    if (!running.contains(it->first.job_id))
      ForgetGpu(it);
    it = next;
  }
}

std::vector<LiveTrigger> LiveDetector::TakeTriggers(int64_t now_ms) {
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    auto next = std::next(it);
    if (now_ms - it->second.last_heard_ms > options_.forget_after_ms)
      ForgetGpu(it);
    it = next;
  }
  std::vector<LiveTrigger> out;
  for (const std::string& job : changed_jobs_)
    Evaluate(job, out);
  changed_jobs_.clear();
  return out;
}

// The job's state from its GPUs' runs: stuck when any GPU has spun for stuck_after_ms (a hung
// collective holds every rank, and one spinning GPU already stops the job), no_process when
// every GPU with a known state has had nothing of the job on it for no_process_after_ms (a job
// using some of its GPUs is over_allocated, which the server's verdicts tell after the fact).
void LiveDetector::Evaluate(const std::string& job_id, std::vector<LiveTrigger>& out) {
  auto by_job = gpus_by_job_.find(job_id);
  if (by_job == gpus_by_job_.end())
    return;
  LiveTrigger stuck;
  stuck.job_id = job_id;
  stuck.reason = "stuck";
  LiveTrigger idle;
  idle.job_id = job_id;
  idle.reason = "no_process";
  bool any_spinning = false, any_without_process = false;
  bool all_without_process = true, any_known = false;
  int64_t newest = 0;
  std::set<std::string> hosts;
  for (const GpuKey& key : by_job->second) {
    const GpuTrack& t = gpus_.at(key);
    hosts.insert(key.host);
    stuck.slurm_job_id = idle.slurm_job_id = std::max(stuck.slurm_job_id, t.slurm_job_id);
    newest = std::max(newest, t.run.through_ms);
    const Run& run = t.run;
    const int64_t length = run.through_ms - run.since_ms;
    if (run.state == GpuCellState::kUnknown)
      continue;
    any_known = true;
    if (run.state == GpuCellState::kSpinning) {
      any_spinning = true;
      if (length >= options_.stuck_after_ms) {
        stuck.gpus.push_back(key.uuid);
        stuck.since_ms =
            stuck.since_ms == 0 ? run.since_ms : std::min(stuck.since_ms, run.since_ms);
        stuck.through_ms = std::max(stuck.through_ms, run.through_ms);
      }
    }
    if (run.state == GpuCellState::kNoProcess) {
      any_without_process = true;
      if (length >= options_.no_process_after_ms) {
        idle.gpus.push_back(key.uuid);
        idle.since_ms = idle.since_ms == 0 ? run.since_ms : std::max(idle.since_ms, run.since_ms);
        idle.through_ms = std::max(idle.through_ms, run.through_ms);
        continue;
      }
    }
    all_without_process = false;
  }
  Episode& episode = jobs_[job_id];
  if (episode.active) {
    const bool still = episode.reason == "stuck" ? any_spinning : any_without_process;
    if (still) {
      episode.clear_since_ms = 0;
    } else if (episode.clear_since_ms == 0) {
      episode.clear_since_ms = newest;
    } else if (newest - episode.clear_since_ms >= options_.rearm_after_ms) {
      episode = Episode{};
    }
    return;
  }
  LiveTrigger* fired = nullptr;
  if (!stuck.gpus.empty())
    fired = &stuck;
  else if (any_known && all_without_process && !idle.gpus.empty())
    fired = &idle;
  if (fired == nullptr)
    return;
  episode = Episode{.active = true, .reason = fired->reason};
  fired->hosts.assign(hosts.begin(), hosts.end());
  std::sort(fired->gpus.begin(), fired->gpus.end());
  ++stats_.triggers;
  out.push_back(std::move(*fired));
}

}  // namespace expanse::agent
