// What `expanse job report` and `expanse jobs` read from the server's console API
// (docs/api.md), as plain data: decoded by report_decode.h from the answers, rendered by
// report_render.h. Names follow the API's members so the two are easy to hold side by side.
#ifndef EXPANSE_REPORT_REPORT_MODEL_H_
#define EXPANSE_REPORT_REPORT_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace expanse::report {

// A job's SLURM request (`requested` in the job answers). 0 = not requested / unknown.
struct Requested {
  int64_t nodes = 0;
  int64_t cpus = 0;
  int64_t gpus = 0;
  int64_t mem_mib = 0;
  int64_t time_limit_s = 0;
};

// What the job used (`used`), as the server summarised it. Optional members are null in the
// answer when the server could not tell (no counters, no cgroup series).
struct Used {
  int64_t gpus_allocated = 0;
  int64_t gpus_active = 0;
  bool has_gpu_samples = false;
  double sm_mean = 0;  // percent
  double sm_peak = 0;
  std::optional<double> sm_active_mean;  // ratio 0..1
  std::optional<double> tensor_active_mean;
  std::string counters_source;  // "" when null
  double gpu_mem_peak_mib = 0;
  double allocated_gpu_hours = 0;
  double idle_gpu_hours = 0;
  int64_t idle_tail_ms = 0;
  std::optional<double> cpu_efficiency;  // mean cores used / cores requested
  std::optional<double> mem_efficiency;  // peak memory / memory requested
  // The job list's `used_omitted`: the server's page ran out of its budget before this job, and
  // the figures above are not the job's (docs/api.md).
  bool omitted = false;
};

// One allocated GPU (`gpus` of the job answer).
struct JobGpu {
  std::string host;
  std::string gpu_uuid;
  int64_t gpu_index = 0;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
};

struct Job {
  std::string compute_id;
  std::string job_id;
  std::string name;
  std::string user;
  std::string account;
  std::string partition;
  std::string state;
  std::string nodes;
  int64_t submit_ms = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;  // 0 while running
  Requested requested;
  Used used;
  std::vector<std::string> hosts;
  std::vector<JobGpu> gpus;  // only in the one-job answer
};

// One downsampled bucket of a timeline: [t_ms, min, max, mean].
struct TimelinePoint {
  int64_t t_ms = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
};

struct GpuSeries {
  std::string host;
  std::string gpu_uuid;
  std::vector<TimelinePoint> points;
};

struct Timeline {
  std::string metric;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::vector<GpuSeries> series;
};

struct Verdict {
  std::string code;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  double confidence = 0;
  std::vector<std::string> gpus;
  std::vector<std::string> hosts;
  // As the server gave it (an object, parsed within the answer's limits): its shape differs per
  // code (docs/formats/verdicts.md), and the renderer shows it generically.
  nlohmann::json evidence = nlohmann::json::object();
  std::string suggestion;
};

struct Verdicts {
  int64_t as_of_ms = 0;
  bool running = false;
  int64_t cell_ms = 0;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::vector<Verdict> verdicts;
};

struct LedgerGpu {
  std::string host;
  std::string gpu_uuid;
  int64_t gpu_index = 0;
  double allocated_gpu_s = 0;
  double sampled_gpu_s = 0;
  double active_gpu_s = 0;
  double idle_gpu_s = 0;
  bool never_used = false;
};

struct LedgerTotals {
  int64_t gpus = 0;
  int64_t never_used_gpus = 0;
  double requested_gpu_s = 0;
  double allocated_gpu_s = 0;
  double sampled_gpu_s = 0;
  double active_gpu_s = 0;
  double idle_gpu_s = 0;
  std::optional<double> idle_share;  // null when nothing was allocated
};

struct Ledger {
  int64_t as_of_ms = 0;
  int64_t requested_gpus = 0;
  LedgerTotals totals;
  std::vector<LedgerGpu> gpus;
};

// Everything `expanse job report` shows.
struct JobReport {
  Job job;
  Timeline timeline;  // gpu.sm_util
  Verdicts verdicts;
  Ledger ledger;
};

// What `expanse jobs` shows: the user's jobs since `since_ms`, newest first.
struct JobList {
  std::string user;
  int64_t since_ms = 0;
  int64_t as_of_ms = 0;
  std::vector<Job> jobs;
  bool truncated = false;  // more jobs matched than were read
};

}  // namespace expanse::report

#endif  // EXPANSE_REPORT_REPORT_MODEL_H_
