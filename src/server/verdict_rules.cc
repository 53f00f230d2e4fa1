#include "server/verdict_rules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "wire/gpu_cell_state.h"

namespace expanse::server {
namespace {

using nlohmann::json;

// What one GPU was doing in one cell, most telling first: the rule shared with the
// controller's live detection.
using CellState = wire::GpuCellState;

// To a decimal unit (0.001, 0.01, 0.1, 1), dividing by the whole number of units per 1 so that
// the result is the double nearest the decimal: 57 * 0.01 would print as 0.5700000000000001.
double Round(double v, double unit = 0.001) {
  const double per_one = std::round(1 / unit);
  return std::round(v * per_one) / per_one;
}

const HostTrack* HostOf(const JobCells& job, const std::string& host) {
  for (const HostTrack& h : job.hosts) {
    if (h.host == host)
      return &h;
  }
  return nullptr;
}

double At(const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : -1; }

double PeakPower(const GpuTrack& gpu) {
  double peak = -1;
  for (size_t i = gpu.first_cell; i < gpu.end_cell && i < gpu.cells.size(); ++i)
    peak = std::max(peak, gpu.cells[i].power_mean);
  return peak;
}

// Cell i of a GPU as the shared rule reads it (wire/gpu_cell_state.h): the job's processes on
// its host come from the host's track.
wire::GpuCellReadings ReadingsOf(const GpuCell& cell, const HostTrack* host, size_t i) {
  return {.samples = cell.samples,
          .util_mean = cell.util_mean,
          .util_max = cell.util_max,
          .power_mean = cell.power_mean,
          .sm_active = cell.sm_active,
          .processes = cell.processes,
          .job_processes = host != nullptr ? At(host->gpu_processes, i) : -1,
          .allocated_jobs = cell.allocated_jobs};
}

// Whether nothing of the job ran on the GPU in cell i: no process at all on the GPU
// (gpu.processes), or none of the job's on its host (job.gpu_processes, which also leaves out
// other jobs' processes); unknown when neither was reported.
std::optional<bool> NoProcess(const GpuCell& cell, const HostTrack* host, size_t i) {
  const int none = wire::NothingRunning(ReadingsOf(cell, host, i));
  if (none < 0)
    return std::nullopt;
  return none == 1;
}

wire::GpuCellThresholds CellThresholds(const VerdictThresholds& t) {
  return {.idle_util_percent = t.idle_util_percent,
          .underused_util_percent = t.underused_util_percent,
          .busy_util_percent = t.busy_util_percent,
          .spinning_sm_active = t.spinning_sm_active,
          .spinning_power_share = t.spinning_power_share};
}

CellState StateOf(const GpuCell& cell, const HostTrack* host, size_t i, double peak_power,
                  const VerdictThresholds& t) {
  return wire::ClassifyGpuCell(ReadingsOf(cell, host, i), peak_power, CellThresholds(t));
}

struct Run {
  size_t first = 0;
  size_t end = 0;  // exclusive
};

// Maximal runs of cells in `state`.
std::vector<Run> RunsOf(const std::vector<CellState>& states, CellState state) {
  std::vector<Run> runs;
  for (size_t i = 0; i < states.size();) {
    if (states[i] != state) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < states.size() && states[j] == state)
      ++j;
    runs.push_back({i, j});
    i = j;
  }
  return runs;
}

// Means of a GPU's cells over a run, for evidence.
json RunFigures(const GpuTrack& gpu, const Run& run) {
  double util = 0, power = 0, sm = 0;
  int util_n = 0, power_n = 0, sm_n = 0;
  double processes_max = -1, allocated_jobs_max = -1;
  for (size_t i = run.first; i < run.end; ++i) {
    const GpuCell& c = gpu.cells[i];
    allocated_jobs_max = std::max(allocated_jobs_max, c.allocated_jobs);
    if (c.samples > 0) {
      util += c.util_mean;
      ++util_n;
    }
    if (c.power_mean >= 0) {
      power += c.power_mean;
      ++power_n;
    }
    if (c.sm_active >= 0) {
      sm += c.sm_active;
      ++sm_n;
    }
    processes_max = std::max(processes_max, c.processes);
  }
  json out = {{"gpu_uuid", gpu.uuid}, {"host", gpu.host}};
  out["sm_util_mean"] = util_n > 0 ? json(Round(util / util_n, 0.1)) : json(nullptr);
  out["power_w_mean"] = power_n > 0 ? json(Round(power / power_n, 0.1)) : json(nullptr);
  out["sm_active_mean"] = sm_n > 0 ? json(Round(sm / sm_n)) : json(nullptr);
  if (processes_max >= 0)
    out["gpu_processes_max"] = processes_max;
  // Said only of a shared GPU: its figures are then the GPU's, neighbours' work included.
  if (allocated_jobs_max > 1)
    out["allocated_jobs_max"] = allocated_jobs_max;
  return out;
}

// The job's CPU on the host over a run: mean cores used, mean cores' worth of time its
// runnable threads waited for a CPU (-1 without job.cpu_wait_cores), and whether every sampled
// cell was saturated (at least half the run sampled). A cell is saturated when the job used, or
// wanted (used + waited), its allocation: on an oversubscribed host a job that wants its CPUs
// gets less than them, and is no less held back by the CPU.
struct CpuFigures {
  double cores = -1;
  double waiting = -1;
  bool saturated = false;
};
CpuFigures CpuOver(const HostTrack* host, const Run& run, const VerdictThresholds& t) {
  if (host == nullptr || host->cores_allocated <= 0)
    return {};
  // The sampler reads a job's threads every few seconds, so a cell can hold CPU use but no
  // wait reading (often the run's first, before a rate exists): such a cell is judged with the
  // nearest reading of the run, earlier ones first.
  std::vector<double> wait_near(run.end - run.first, -1);
  double nearest = -1;
  for (size_t i = run.first; i < run.end && !host->cpu_wait.empty(); ++i) {
    if (const double w = At(host->cpu_wait, i); w >= 0)
      nearest = w;
    wait_near[i - run.first] = nearest;
  }
  nearest = -1;
  for (size_t i = run.end; i > run.first && !host->cpu_wait.empty(); --i) {
    if (const double w = At(host->cpu_wait, i - 1); w >= 0)
      nearest = w;
    if (wait_near[i - 1 - run.first] < 0)
      wait_near[i - 1 - run.first] = nearest;
  }
  double sum = 0, wait_sum = 0;
  size_t n = 0, wait_n = 0;
  bool saturated = true;
  for (size_t i = run.first; i < run.end; ++i) {
    const double cores = At(host->cpu_cores, i);
    if (cores < 0)
      continue;
    sum += cores;
    ++n;
    const double waiting = host->cpu_wait.empty() ? -1 : At(host->cpu_wait, i);
    if (waiting >= 0) {
      wait_sum += waiting;
      ++wait_n;
    }
    if (cores + std::max(0.0, wait_near[i - run.first]) <
        t.cpu_saturated_share * host->cores_allocated)
      saturated = false;
  }
  if (n == 0)
    return {};
  return {sum / static_cast<double>(n), wait_n > 0 ? wait_sum / static_cast<double>(wait_n) : -1,
          saturated && 2 * n >= run.end - run.first};
}

// The job's I/O stalls on the host over a run: the mean share of time some task was stalled
// on I/O, from io.pressure where the node has it (cgroup v2 with pressure stall information),
// else as sampled from its threads' states (job.uninterruptible_some: any cgroup version), and
// whether that reaches its source's threshold with at least half the run sampled. Pressure is
// the measure; the states are read when pressure covers less than half the run (v1, no PSI, or
// a gap) and they cover more. share < 0: neither series has a cell in the run.
struct IoFigures {
  double share = -1;
  bool stalled = false;
  bool from_thread_states = false;  // job.uninterruptible_some, not io.pressure
};

IoFigures IoOver(const HostTrack* host, const Run& run, const VerdictThresholds& t) {
  if (host == nullptr)
    return {};
  struct Mean {
    double share = -1;
    size_t cells = 0;
  };
  const auto mean_over = [&](const std::vector<double>& cells) {
    Mean m;
    double sum = 0;
    for (size_t i = run.first; i < run.end && !cells.empty(); ++i) {
      const double share = At(cells, i);
      if (share < 0)
        continue;
      sum += share;
      ++m.cells;
    }
    if (m.cells > 0)
      m.share = sum / static_cast<double>(m.cells);
    return m;
  };
  const auto covers = [&](const Mean& m) { return 2 * m.cells >= run.end - run.first; };
  const Mean pressure = mean_over(host->io_some);
  const Mean states = mean_over(host->uninterruptible);
  if (pressure.cells > 0 && (covers(pressure) || states.cells <= pressure.cells))
    return {pressure.share, covers(pressure) && pressure.share >= t.io_pressure_share, false};
  if (states.cells == 0)
    return {};
  return {states.share, covers(states) && states.share >= t.uninterruptible_share, true};
}

std::string GiB(double mib) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f GiB", mib / 1024);
  return text;
}

// Verdicts of the same code and interval, one per GPU, become one naming every GPU.
std::vector<Verdict> MergeSameIntervals(std::vector<Verdict> verdicts) {
  std::map<std::tuple<std::string, int64_t, int64_t>, size_t> index;
  std::vector<Verdict> out;
  for (Verdict& v : verdicts) {
    const auto key = std::make_tuple(v.code, v.from_ms, v.to_ms);
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = out.size();
      out.push_back(std::move(v));
      continue;
    }
    Verdict& kept = out[it->second];
    kept.gpus.insert(kept.gpus.end(), v.gpus.begin(), v.gpus.end());
    for (const std::string& h : v.hosts) {
      if (std::find(kept.hosts.begin(), kept.hosts.end(), h) == kept.hosts.end())
        kept.hosts.push_back(h);
    }
    kept.confidence = std::min(kept.confidence, v.confidence);
    for (auto& g : v.evidence["gpus"])
      kept.evidence["gpus"].push_back(std::move(g));
  }
  return out;
}

}  // namespace

SeriesVerdicts ComputeSeriesVerdicts(const JobCells& job, const VerdictThresholds& t) {
  SeriesVerdicts out;
  // Cell i's start; the grid's end is the job's, not a whole cell past it.
  const auto cell_from = [&](size_t i) {
    const int64_t at = job.start_ms + static_cast<int64_t>(i) * job.cell_ms;
    return job.end_ms > job.start_ms ? std::min(at, job.end_ms) : at;
  };
  const int64_t min_cells =
      std::max<int64_t>(1, (t.min_interval_ms + job.cell_ms - 1) / job.cell_ms);
  std::vector<Verdict> per_gpu;
  std::vector<Underused> underused;
  size_t gpus_active = 0;
  bool all_sampled = true;  // every GPU seen for at least half its allocation
  bool any_process = false, process_known = false;
  double mem_peak = -1, mem_total = -1;
  std::string model;
  json per_gpu_activity = json::array();

  for (const GpuTrack& gpu : job.gpus) {
    const HostTrack* host = HostOf(job, gpu.host);
    const double peak_power = PeakPower(gpu);
    std::vector<CellState> states(job.cells, CellState::kUnknown);
    int64_t active_cells = 0, sampled_cells = 0;
    for (size_t i = gpu.first_cell; i < gpu.end_cell && i < gpu.cells.size(); ++i) {
      const GpuCell& c = gpu.cells[i];
      states[i] = StateOf(c, host, i, peak_power, t);
      if (c.samples > 0)
        ++sampled_cells;
      if (wire::ActiveForJob(ReadingsOf(c, host, i), CellThresholds(t)))
        ++active_cells;
      if (const std::optional<bool> none = NoProcess(c, host, i)) {
        process_known = true;
        any_process = any_process || !*none;
      }
      if (c.mem_max_mib > mem_peak)
        mem_peak = c.mem_max_mib;
    }
    if (active_cells > 0)
      ++gpus_active;
    const size_t allocated_cells =
        gpu.end_cell > gpu.first_cell ? gpu.end_cell - gpu.first_cell : 0;
    if (allocated_cells == 0 || 2 * static_cast<size_t>(sampled_cells) < allocated_cells)
      all_sampled = false;
    if (gpu.memory_total_mib > 0) {
      mem_total = std::max(mem_total, gpu.memory_total_mib);
      model = gpu.model;
    }
    per_gpu_activity.push_back({{"gpu_uuid", gpu.uuid},
                                {"host", gpu.host},
                                {"active_s", active_cells * job.cell_ms / 1000},
                                {"sampled_s", sampled_cells * job.cell_ms / 1000}});

    for (const Run& run : RunsOf(states, CellState::kNoProcess)) {
      if (static_cast<int64_t>(run.end - run.first) < min_cells)
        continue;
      json figures = RunFigures(gpu, run);
      per_gpu.push_back({"no_process",
                         cell_from(run.first),
                         cell_from(run.end),
                         figures.contains("gpu_processes_max") || host != nullptr ? 0.9 : 0.7,
                         {gpu.uuid},
                         {gpu.host},
                         {{"gpus", json::array({figures})}},
                         "the job held GPUs with no process of its own on them: start the GPU "
                         "work sooner, or ask for GPUs only for the steps that use them"});
    }
    for (const Run& run : RunsOf(states, CellState::kSpinning)) {
      const int64_t length = static_cast<int64_t>(run.end - run.first) * job.cell_ms;
      if (length < std::max(t.min_interval_ms, job.cell_ms))
        continue;
      json figures = RunFigures(gpu, run);
      const bool counters = !figures["sm_active_mean"].is_null();
      if (!counters && peak_power > 0)
        figures["power_share_of_job_peak"] =
            Round(figures["power_w_mean"].get<double>() / peak_power);
      const bool stuck = length >= t.stuck_after_ms;
      per_gpu.push_back(
          {stuck ? "stuck" : "communication_wait",
           cell_from(run.first),
           cell_from(run.end),
           stuck ? (counters ? 0.9 : 0.6) : (counters ? 0.6 : 0.4),
           {gpu.uuid},
           {gpu.host},
           {{"gpus", json::array({figures})},
            {"rule", counters ? "utilisation high while SM activity stayed near zero"
                              : "utilisation high at a fraction of the GPU's own peak power"}},
           stuck ? "a kernel has been running without doing work (a hung collective or a "
                   "deadlock): take the job's stacks (expanse job report) and cancel it if "
                   "the ranks are waiting on each other"
                 : "kernels ran without doing work for a while, as ranks do waiting in a "
                   "collective: look for a straggling rank or an unbalanced step"});
    }
    for (const Run& run : RunsOf(states, CellState::kUnderused)) {
      if (static_cast<int64_t>(run.end - run.first) < min_cells)
        continue;
      const CpuFigures cpu = CpuOver(host, run, t);
      json figures = RunFigures(gpu, run);
      json evidence = {{"gpus", json::array({figures})}};
      if (cpu.cores >= 0) {
        evidence["cpu"] = {{"host", gpu.host},
                           {"cores_used_mean", Round(cpu.cores, 0.01)},
                           {"cores_allocated", host->cores_allocated}};
        if (cpu.waiting >= 0)
          evidence["cpu"]["cores_waiting_mean"] = Round(cpu.waiting, 0.01);
      }
      const IoFigures io = IoOver(host, run, t);
      if (io.share >= 0) {
        evidence["io"] = {
            {"host", gpu.host},
            {io.from_thread_states ? "uninterruptible_some_mean" : "pressure_some_mean",
             Round(io.share)}};
      }
      underused.push_back({cell_from(run.first),
                           cell_from(run.end),
                           {gpu.uuid},
                           {gpu.host},
                           cpu.saturated,
                           io.stalled,
                           evidence});
    }
  }

  // Whole-job verdicts.
  if (!job.gpus.empty() && job.cells > 0) {
    const int64_t from = cell_from(0), to = cell_from(job.cells);
    std::vector<std::string> uuids, hosts;
    for (const GpuTrack& g : job.gpus) {
      uuids.push_back(g.uuid);
      if (std::find(hosts.begin(), hosts.end(), g.host) == hosts.end())
        hosts.push_back(g.host);
    }
    // What the job's CPU side wanted: the cores it used plus the cores' worth of run-queue wait
    // where the daemon sends it. On a node whose cores are oversubscribed (or a test machine
    // shared with other work) a spinning job gets a fraction of a core and waits for the rest;
    // it is no less a CPU-only job for that.
    double cpu_sum = 0, wait_sum = 0;
    size_t cpu_n = 0, wait_n = 0;
    for (const HostTrack& h : job.hosts) {
      for (size_t i = 0; i < h.cpu_cores.size(); ++i) {
        if (h.cpu_cores[i] < 0)
          continue;
        cpu_sum += h.cpu_cores[i];
        ++cpu_n;
        if (const double w = At(h.cpu_wait, i); w >= 0) {
          wait_sum += w;
          ++wait_n;
        }
      }
    }
    const double cpu_mean = cpu_n > 0 ? cpu_sum / static_cast<double>(cpu_n) : -1;
    const double wait_mean = wait_n > 0 ? wait_sum / static_cast<double>(wait_n) : -1;
    const double cpu_wanted = cpu_mean < 0 ? -1 : cpu_mean + std::max(0.0, wait_mean);
    // A running job's first minutes may be CPU preprocessing before any GPU work: cpu_only
    // ("submit it without --gres=gpu") waits until it has run kCpuOnlyAfterMs, or has ended.
    constexpr int64_t kCpuOnlyAfterMs = 10 * 60'000;
    const bool long_enough = !job.running || job.end_ms - job.start_ms >= kCpuOnlyAfterMs;
    const bool cpu_only = long_enough && all_sampled && gpus_active == 0 && process_known &&
                          !any_process && cpu_wanted >= t.cpu_only_cores;
    if (cpu_only) {
      json evidence = {{"gpus", per_gpu_activity},
                       {"job_gpu_processes_max", 0},
                       {"cpu_cores_used_mean", Round(cpu_mean, 0.01)}};
      if (wait_mean >= 0)
        evidence["cpu_cores_waiting_mean"] = Round(wait_mean, 0.01);
      out.verdicts.push_back({"cpu_only", from, to, 0.9, uuids, hosts, std::move(evidence),
                              "the job never used its GPUs: submit it without --gres=gpu (or "
                              "check that it finds CUDA)"});
      std::erase_if(per_gpu, [](const Verdict& v) { return v.code == "no_process"; });
    }
    const size_t allocated = job.gpus.size();
    // A GPU never seen (its node's sampler down, its spool lost) is not an unused GPU.
    // Not held back like cpu_only: one GPU active of several is worth saying of a running job
    // (an alert's scancel acts on it), at lower confidence while it is young.
    if (gpus_active >= 1 && gpus_active < allocated && all_sampled) {
      out.verdicts.push_back(
          {"over_allocated",
           from,
           to,
           job.cells >= 10 ? 0.9 : 0.6,
           uuids,
           hosts,
           {{"gpus_allocated", allocated},
            {"gpus_active", gpus_active},
            {"gpus", per_gpu_activity}},
           // --gres counts per node: over several, say the total.
           hosts.size() == 1
               ? "ask for " + std::to_string(gpus_active) + " GPU" + (gpus_active == 1 ? "" : "s") +
                     ", not " + std::to_string(allocated) +
                     " (--gres=gpu:" + std::to_string(gpus_active) + ")"
               : "ask for " + std::to_string(gpus_active) + " GPUs in all, not " +
                     std::to_string(allocated) + " (fewer nodes or GPUs per node)"});
    }
    // Only once the job has ended: a running job may still be loading its model.
    if (!job.running && gpus_active >= 1 && mem_peak >= 0 && mem_total > 0 &&
        mem_peak < t.memory_oversized_share * mem_total) {
      const std::string profile = SmallestMigProfile(model, mem_peak * 1.2);
      out.verdicts.push_back({"memory_oversized",
                              from,
                              to,
                              0.8,
                              uuids,
                              hosts,
                              {{"gpu_memory_peak_mib", Round(mem_peak, 1)},
                               {"gpu_memory_total_mib", mem_total},
                               {"share", Round(mem_peak / mem_total)},
                               {"model", model}},
                              GiB(mem_peak) + " of " + GiB(mem_total) + " used at the peak: " +
                                  (profile.empty() ? std::string("a GPU with less memory would do")
                                                   : "a MIG " + profile + " slice would do")});
    }
  }
  std::vector<Verdict> merged = MergeSameIntervals(std::move(per_gpu));
  out.verdicts.insert(out.verdicts.end(), merged.begin(), merged.end());

  // Underused intervals of several GPUs that coincide are one question for the stacks.
  std::map<std::pair<int64_t, int64_t>, Underused> by_interval;
  for (Underused& u : underused) {
    auto [it, fresh] = by_interval.try_emplace({u.from_ms, u.to_ms}, u);
    if (fresh)
      continue;
    Underused& kept = it->second;
    kept.gpus.push_back(u.gpus[0]);
    if (std::find(kept.hosts.begin(), kept.hosts.end(), u.hosts[0]) == kept.hosts.end())
      kept.hosts.push_back(u.hosts[0]);
    kept.cpu_saturated = kept.cpu_saturated && u.cpu_saturated;
    kept.io_stalled = kept.io_stalled && u.io_stalled;
    kept.evidence["gpus"].push_back(u.evidence["gpus"][0]);
  }
  for (auto& [interval, u] : by_interval)
    out.underused.push_back(std::move(u));
  std::sort(out.verdicts.begin(), out.verdicts.end(), [](const Verdict& a, const Verdict& b) {
    return std::tie(a.from_ms, a.code, a.to_ms) < std::tie(b.from_ms, b.code, b.to_ms);
  });
  return out;
}

namespace {

// io_wait's suggestion from its `io` evidence (ComputeSeriesVerdicts writes one of the two
// shares): pressure is time stalled on I/O; thread states are samples with a thread in D, which
// is most often, not always, I/O.
std::string IoSuggestion(const json& io) {
  const bool from_states = io.contains("uninterruptible_some_mean");
  const std::string host = io.at("host").get<std::string>();
  const std::string percent = std::to_string(static_cast<int>(std::lround(
      io.at(from_states ? "uninterruptible_some_mean" : "pressure_some_mean").get<double>() *
      100)));
  return (from_states ? "GPU idle while a thread of the job on " + host +
                            " was in uninterruptible sleep (most often waiting on I/O) in " +
                            percent + " % of samples"
                      : "GPU idle while the job's tasks on " + host + " were stalled on I/O " +
                            percent + " % of the time") +
         ": stage the data on node-local disk, read it in larger chunks or with more loader "
         "workers, or check the file system's load";
}

}  // namespace

std::optional<Verdict> ExplainUnderused(const Underused& interval,
                                        const std::vector<store::StackTotal>& stacks,
                                        const VerdictThresholds& t) {
  const StackClassShares shares = ClassifyStacks(stacks);
  double share = 0;
  const FrameClass dominant = shares.Dominant(&share);
  json evidence = interval.evidence;
  if (dominant != FrameClass::kOther && share >= t.stack_share) {
    // The heaviest stacks of that class, and the frame that put the top one in it.
    json top = json::array();
    std::string_view frame;
    for (const store::StackTotal& s : stacks) {
      std::string_view decided;
      const int64_t n = shares.gpu_idle_only ? s.gpu_idle_count : s.count;
      if (n <= 0 || ClassifyStack(s.folded, &decided) != dominant)
        continue;
      if (frame.empty())
        frame = decided;
      top.push_back({{"folded", s.folded}, {"count", n}, {"thread_state", s.thread_state}});
      if (top.size() == 3)
        break;
    }
    evidence["stacks"] = {{"samples", shares.samples},
                          {"gpu_idle_samples_only", shares.gpu_idle_only},
                          {"input", shares.input},
                          {"collective", shares.collective},
                          {"sync", shares.sync},
                          {"share", Round(share)},
                          {"top", top}};
    const std::string percent = std::to_string(static_cast<int>(std::lround(share * 100))) + " %";
    const std::string where = "`" + std::string(frame) + "`";
    Verdict v{"",
              interval.from_ms,
              interval.to_ms,
              std::min(0.95, 0.5 + share / 2),
              interval.gpus,
              interval.hosts,
              evidence,
              ""};
    switch (dominant) {
      case FrameClass::kInput:
        v.code = "input_bound";
        v.suggestion = "GPU idle, " + percent + " of the job's stack samples in data loading (" +
                       where + "): raise the DataLoader's num_workers, use pin_memory and " +
                       "persistent_workers, or read the data from faster storage";
        break;
      case FrameClass::kCollective:
        v.code = "communication_wait";
        v.suggestion = "GPU idle, " + percent + " of the job's stack samples waiting in a " +
                       "collective (" + where + "): look for a straggling rank, an unbalanced " +
                       "step, or a slow interconnect";
        break;
      case FrameClass::kSync:
        v.code = "sync_bound";
        v.suggestion = "GPU idle, " + percent + " of the job's stack samples waiting on the " +
                       "device (" + where + "): avoid .item(), .cpu() and synchronize() " +
                       "inside the training step";
        break;
      case FrameClass::kOther:
        break;
    }
    return v;
  }
  if (interval.io_stalled && evidence.contains("io")) {
    if (shares.samples > 0)
      evidence["stacks"] = {{"samples", shares.samples}, {"share", Round(share)}};
    return Verdict{"io_wait",     interval.from_ms, interval.to_ms, 0.7,
                   interval.gpus, interval.hosts,   evidence,       IoSuggestion(evidence["io"])};
  }
  if (interval.cpu_saturated && evidence.contains("cpu")) {
    if (shares.samples > 0)
      evidence["stacks"] = {{"samples", shares.samples}, {"share", Round(share)}};
    const json& cpu = evidence["cpu"];
    char cores[32];
    std::snprintf(cores, sizeof(cores), "%g", cpu["cores_allocated"].get<double>());
    return Verdict{"host_bound",
                   interval.from_ms,
                   interval.to_ms,
                   0.7,
                   interval.gpus,
                   interval.hosts,
                   evidence,
                   "the job's " + std::string(cores) + " CPUs on " +
                       cpu["host"].get<std::string>() +
                       " were saturated while its GPUs waited: ask for more CPUs per GPU "
                       "(--cpus-per-gpu), or move preprocessing onto the GPU"};
  }
  return std::nullopt;
}

std::string SmallestMigProfile(const std::string& model, double needed_mib) {
  struct Profile {
    std::string_view name;
    double gb;
  };
  struct Family {
    std::string_view match;  // in the model name
    std::string_view also;   // a second fragment it must contain ("" = none)
    std::array<Profile, 6> profiles;
  };
  // NVIDIA's MIG user guide, per product; gb is the profile's nominal memory.
  static constexpr std::array kFamilies = {
      Family{"H200",
             "",
             {{{"1g.18gb", 18},
               {"1g.35gb", 35},
               {"2g.35gb", 35},
               {"3g.71gb", 71},
               {"4g.71gb", 71},
               {"7g.141gb", 141}}}},
      Family{"H100",
             "NVL",
             {{{"1g.12gb", 12},
               {"1g.24gb", 24},
               {"2g.24gb", 24},
               {"3g.47gb", 47},
               {"4g.47gb", 47},
               {"7g.94gb", 94}}}},
      Family{"H100",
             "",
             {{{"1g.10gb", 10},
               {"1g.20gb", 20},
               {"2g.20gb", 20},
               {"3g.40gb", 40},
               {"4g.40gb", 40},
               {"7g.80gb", 80}}}},
      Family{"A100",
             "80GB",
             {{{"1g.10gb", 10},
               {"1g.20gb", 20},
               {"2g.20gb", 20},
               {"3g.40gb", 40},
               {"4g.40gb", 40},
               {"7g.80gb", 80}}}},
      Family{"A100",
             "",
             {{{"1g.5gb", 5},
               {"1g.10gb", 10},
               {"2g.10gb", 10},
               {"3g.20gb", 20},
               {"4g.20gb", 20},
               {"7g.40gb", 40}}}},
      Family{"A30",
             "",
             {{{"1g.6gb", 6}, {"2g.12gb", 12}, {"4g.24gb", 24}, {"", 0}, {"", 0}, {"", 0}}}},
  };
  for (const Family& f : kFamilies) {
    if (model.find(f.match) == std::string::npos ||
        (!f.also.empty() && model.find(f.also) == std::string::npos))
      continue;
    for (const Profile& p : f.profiles) {
      // A profile's usable memory is a little under its nominal size.
      if (!p.name.empty() && p.gb * 1024 * 0.93 >= needed_mib)
        return std::string(p.name);
    }
    return "";
  }
  return "";
}

}  // namespace expanse::server
