// The job list's cost per page (issue 17): GET /api/v1/orgs/:org/jobs reads a page of jobs and,
// for each, its GPU allocations, node events and four telemetry series per GPU and host. This
// program builds a real store and telemetry store in a temporary directory (a cluster of
// 64 nodes x 8 GPUs that ran `--jobs` jobs, 100,000 by default, GPU series sampled every 10 s
// over each job's run and the jobs' cgroup series every 30 s), then times the first, a middle
// and the last page of 100 jobs with usage both ways, checking that both give the same jobs,
// hosts and numbers:
//
//   old: the list sorted by an expression no index serves, then per job GpuAllocations,
//        NodeEvents and ComputeJobUsage (one Tsdb::Query per series): the route before.
//   new: ListJobs on jobs_by_compute_sort, then JobsWithUsage (two batch reads, one
//        Tsdb::QueryMany): the route now.
//
// A plain program, not a Google Benchmark, that never asserts timings: run it from a Release
// build, `bench_jobs_list [--jobs N] [--rounds N] [--keep]`. Figures: docs/performance.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "core/clock.h"
#include "server/job_usage.h"
#include "store/sqlite_connection.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store.h"
#include "store/store.h"
#include "tsdb/tsdb.h"

namespace {

using expanse::bench::Median;
using expanse::bench::MsSince;

using expanse::Result;
using expanse::Status;
using expanse::server::JobUsage;
using expanse::server::JobWithUsage;
using expanse::store::GpuAllocation;
using expanse::store::JobNodeEvent;
using expanse::store::JobRecord;
using expanse::tsdb::Sample;
using expanse::tsdb::SeriesKey;

constexpr int64_t kStartMs = 1'764'547'200'000;  // 2025-12-01T00:00:00Z
constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kGpuStepMs = 10'000;
constexpr int64_t kJobSeriesStepMs = 30'000;
constexpr int kNodes = 64;
constexpr int kGpusPerNode = 8;
constexpr int kPageSize = 100;
constexpr const char* kCompute = "cmp_bench";

struct Options {
  int jobs = 100'000;
  int rounds = 5;
  bool keep = false;  // leave the data directory for a look with sqlite3
};

// What a job's GPUs did: nothing, steady work, or work and then an idle tail.
enum class Profile { kIdle, kBusy, kIdleTail };

struct Placement {
  int node = 0;
  std::vector<int> gpus;
};

struct SimJob {
  JobRecord record;
  std::vector<Placement> placements;  // empty for a pending job
  Profile profile = Profile::kBusy;
  double sm_level = 0;    // percent while busy
  double mem_level = 0;   // MiB per GPU
  double cpu_share = 0;   // of the requested cores
  double mem_share = 0;   // of the requested memory
  double busy_share = 1;  // kIdleTail: the part of the run with work
};

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "bench_jobs_list: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

void Check(const Status& status, const std::string& what) {
  if (!status.ok())
    Die(what, status);
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string NodeName(int node) {
  char name[16];
  std::snprintf(name, sizeof name, "gpu-%03d", node + 1);
  return name;
}

std::string GpuUuid(int node, int gpu) {
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%08x-5e1f-4d2a-9b3c-%012x",
                0x1000u + static_cast<unsigned>(node), static_cast<unsigned>(gpu));
  return uuid;
}

// ----------------------------------------------------------------------------------------------
// The cluster's history: jobs arrive, wait for GPUs, run and leave.

struct Shape {
  int gpus = 1;
  int nodes = 1;
};

// Most jobs take 1-8 GPUs of one node; a few span two.
Shape DrawShape(std::mt19937_64& random) {
  const int roll = static_cast<int>(random() % 100);
  if (roll < 35)
    return {1, 1};
  if (roll < 60)
    return {2, 1};
  if (roll < 78)
    return {4, 1};
  if (roll < 92)
    return {8, 1};
  if (roll < 97)
    return {8, 2};  // 4 + 4
  return {16, 2};   // 8 + 8
}

// Log-uniform between 2 minutes and 90 minutes: mostly short jobs, as a busy cluster's
// hundred thousand jobs are.
int64_t DrawRunMs(std::mt19937_64& random) {
  std::uniform_real_distribution<double> u(std::log(2.0), std::log(90.0));
  return static_cast<int64_t>(std::exp(u(random)) * static_cast<double>(kMinuteMs));
}

// The GPU free times of each node; a job takes the node(s) where its GPUs free up first.
class Scheduler {
 public:
  Scheduler() : free_at_(kNodes, std::vector<int64_t>(kGpusPerNode, kStartMs)) {}

  // Places a job of `shape` submitted at `submit_ms`; returns its start.
  int64_t Place(const Shape& shape, int64_t submit_ms, std::vector<Placement>& placements) {
    const int per_node = shape.gpus / shape.nodes;
    std::vector<std::pair<int64_t, int>> ready;  // when per_node GPUs are free, node
    for (int n = 0; n < kNodes; ++n) {
      std::vector<int64_t> times = free_at_[n];
      std::nth_element(times.begin(), times.begin() + per_node - 1, times.end());
      ready.emplace_back(times[static_cast<size_t>(per_node - 1)], n);
    }
    std::partial_sort(ready.begin(), ready.begin() + shape.nodes, ready.end());
    int64_t start = submit_ms;
    for (int i = 0; i < shape.nodes; ++i)
      start = std::max(start, ready[static_cast<size_t>(i)].first);
    for (int i = 0; i < shape.nodes; ++i) {
      const int node = ready[static_cast<size_t>(i)].second;
      std::vector<int> gpus(kGpusPerNode);
      for (int g = 0; g < kGpusPerNode; ++g)
        gpus[static_cast<size_t>(g)] = g;
      std::sort(gpus.begin(), gpus.end(),
                [&](int a, int b) { return free_at_[node][a] < free_at_[node][b]; });
      gpus.resize(static_cast<size_t>(per_node));
      std::sort(gpus.begin(), gpus.end());
      placements.push_back({node, gpus});
    }
    return start;
  }

  void Hold(const std::vector<Placement>& placements, int64_t until_ms) {
    for (const Placement& p : placements) {
      for (const int g : p.gpus)
        free_at_[p.node][g] = until_ms;
    }
  }

 private:
  std::vector<std::vector<int64_t>> free_at_;
};

void DrawUsage(SimJob& job, std::mt19937_64& random) {
  const int roll = static_cast<int>(random() % 100);
  job.profile = roll < 15 ? Profile::kIdle : roll < 80 ? Profile::kBusy : Profile::kIdleTail;
  job.sm_level = 55.0 + static_cast<double>(random() % 43);
  job.mem_level = 2048.0 + 512.0 * static_cast<double>(random() % 150);
  job.cpu_share = 0.1 + 0.01 * static_cast<double>(random() % 90);
  job.mem_share = 0.1 + 0.01 * static_cast<double>(random() % 85);
  job.busy_share = 0.4 + 0.01 * static_cast<double>(random() % 50);
}

JobRecord DrawRecord(int index, const Shape& shape, int64_t submit_ms, std::mt19937_64& random) {
  JobRecord r;
  r.compute_id = kCompute;
  // One job in ten is an array task.
  r.job_id = index % 10 == 3
                 ? std::to_string(4'000'000 + index - 1) + "_" + std::to_string(random() % 32)
                 : std::to_string(4'000'000 + index);
  static const char* const kNames[] = {"train", "finetune", "eval", "preprocess", "infer"};
  r.name = kNames[random() % 5];
  r.user = "user" + std::to_string(random() % 120);
  r.account = "proj" + std::to_string(random() % 25);
  r.partition = shape.gpus >= 8 ? "gpu-large" : "gpu";
  r.submit_ms = submit_ms;
  r.req_nodes = shape.nodes;
  r.req_gpus = shape.gpus;
  r.req_cpus = 8 * shape.gpus;
  r.req_mem_mib = 65'536 * shape.gpus;
  r.time_limit_s = 4 * 3600;
  return r;
}

// Runs the cluster until every job is submitted; `now_ms` is just after the last submission,
// so the newest jobs are still running or pending.
std::vector<SimJob> Simulate(const Options& options, int64_t& now_ms) {
  std::mt19937_64 random(17);
  // Arrivals at ~90% of the cluster's GPU time: a job takes 3.6 GPUs for 23 minutes on average.
  constexpr double kMeanGpuMs = 3.6 * 23.0 * kMinuteMs;
  std::exponential_distribution<double> gap(kNodes * kGpusPerNode * 0.9 / kMeanGpuMs);
  Scheduler scheduler;
  std::vector<SimJob> jobs;
  jobs.reserve(static_cast<size_t>(options.jobs));
  double submit = static_cast<double>(kStartMs);
  for (int i = 0; i < options.jobs; ++i) {
    submit += gap(random);
    const Shape shape = DrawShape(random);
    SimJob job;
    job.record = DrawRecord(i, shape, static_cast<int64_t>(submit), random);
    job.record.start_ms = scheduler.Place(shape, job.record.submit_ms, job.placements);
    job.record.end_ms = job.record.start_ms + DrawRunMs(random);
    scheduler.Hold(job.placements, job.record.end_ms);
    DrawUsage(job, random);
    jobs.push_back(std::move(job));
  }
  now_ms = static_cast<int64_t>(submit) + 5 * kMinuteMs;
  for (SimJob& job : jobs) {
    JobRecord& r = job.record;
    r.observed_ms = now_ms;
    if (r.start_ms >= now_ms) {
      r.state = "PENDING";
      r.start_ms = 0;
      r.end_ms = 0;
      job.placements.clear();
    } else if (r.end_ms > now_ms) {
      r.state = "RUNNING";
      r.end_ms = 0;
    } else {
      r.state = job.profile == Profile::kIdle && r.job_id.back() == '7' ? "FAILED" : "COMPLETED";
    }
  }
  return jobs;
}

// ----------------------------------------------------------------------------------------------
// Writing the history into the stores, as the ingest path would have.

void WriteJobs(expanse::store::JobStore& store, const std::vector<SimJob>& jobs) {
  std::vector<JobRecord> records;
  std::vector<GpuAllocation> allocations;
  std::vector<JobNodeEvent> events;
  const auto flush = [&]() {
    Check(store.UpsertJobs(records), "UpsertJobs");
    Check(store.PutGpuAllocations(allocations), "PutGpuAllocations");
    Check(store.AddNodeEvents(events), "AddNodeEvents");
    records.clear();
    allocations.clear();
    events.clear();
  };
  for (const SimJob& job : jobs) {
    const JobRecord& r = job.record;
    records.push_back(r);
    for (const Placement& p : job.placements) {
      events.push_back({kCompute, r.job_id, NodeName(p.node), "start", r.start_ms});
      if (r.end_ms != 0)
        events.push_back({kCompute, r.job_id, NodeName(p.node), "end", r.end_ms});
      for (const int g : p.gpus) {
        allocations.push_back(
            {kCompute, r.job_id, NodeName(p.node), GpuUuid(p.node, g), g, g, r.start_ms, r.end_ms});
      }
    }
    if (records.size() == 2000)
      flush();
  }
  flush();
}

// Samples every `step_ms` on the step grid within [from_ms, to_ms).
template <typename Value>
void SampleRun(int64_t from_ms, int64_t to_ms, int64_t step_ms, std::vector<Sample>& out,
               Value value) {
  for (int64_t t = (from_ms + step_ms - 1) / step_ms * step_ms; t < to_ms; t += step_ms)
    out.push_back({t, value(t)});
}

class TelemetryWriter {
 public:
  explicit TelemetryWriter(expanse::tsdb::Tsdb& tsdb) : tsdb_(tsdb) {}

  void Add(SeriesKey key, std::vector<Sample> samples) {
    samples_ += samples.size();
    pending_ += samples.size();
    batch_.Add(key, samples);
    if (pending_ >= 400'000)
      Send();
  }

  void Send() {
    if (batch_.empty())
      return;
    auto appended = tsdb_.Append("gen-" + std::to_string(batches_++), batch_,
                                 expanse::tsdb::Tsdb::Ack::kReceived);
    if (!appended.ok())
      Die("Append", appended.status());
    batch_ = {};
    pending_ = 0;
  }

  uint64_t samples() const { return samples_; }

 private:
  expanse::tsdb::Tsdb& tsdb_;
  expanse::tsdb::Batch batch_;
  uint64_t pending_ = 0;
  uint64_t samples_ = 0;
  int batches_ = 0;
};

// SM utilisation of `job` at `t_ms`: small integer jitter around its level while it works.
double SmAt(const SimJob& job, int64_t t_ms, std::mt19937_64& random) {
  const JobRecord& r = job.record;
  bool busy = job.profile == Profile::kBusy;
  if (job.profile == Profile::kIdleTail) {
    const int64_t end = r.end_ms != 0 ? r.end_ms : t_ms + 1;
    busy = t_ms < r.start_ms +
                      static_cast<int64_t>(job.busy_share * static_cast<double>(end - r.start_ms));
  }
  if (!busy)
    return random() % 50 == 0 ? 1.0 : 0.0;
  return std::min(100.0, job.sm_level + static_cast<double>(random() % 7) - 3.0);
}

// Each GPU's two series over every job it ran, in time order.
void WriteGpuSeries(TelemetryWriter& writer, const std::vector<SimJob>& jobs, int64_t now_ms) {
  std::vector<std::vector<std::vector<const SimJob*>>> by_gpu(
      kNodes, std::vector<std::vector<const SimJob*>>(kGpusPerNode));
  for (const SimJob& job : jobs) {
    for (const Placement& p : job.placements) {
      for (const int g : p.gpus)
        by_gpu[p.node][g].push_back(&job);
    }
  }
  std::mt19937_64 random(29);
  for (int n = 0; n < kNodes; ++n) {
    for (int g = 0; g < kGpusPerNode; ++g) {
      std::vector<Sample> sm, mem;
      for (const SimJob* job : by_gpu[n][g]) {  // start order: the scheduler's order per GPU
        const int64_t to = job->record.end_ms != 0 ? job->record.end_ms : now_ms;
        SampleRun(job->record.start_ms, to, kGpuStepMs, sm,
                  [&](int64_t t) { return SmAt(*job, t, random); });
        SampleRun(job->record.start_ms, to, kGpuStepMs, mem,
                  [&](int64_t) { return job->mem_level; });
      }
      writer.Add({kCompute, NodeName(n), GpuUuid(n, g), "gpu.sm_util"}, std::move(sm));
      writer.Add({kCompute, NodeName(n), GpuUuid(n, g), "gpu.mem_used_mib"}, std::move(mem));
    }
  }
}

// Each job's cgroup series on each of its nodes.
void WriteJobSeries(TelemetryWriter& writer, const std::vector<SimJob>& jobs, int64_t now_ms) {
  std::mt19937_64 random(31);
  for (const SimJob& job : jobs) {
    const JobRecord& r = job.record;
    const int64_t to = r.end_ms != 0 ? r.end_ms : now_ms;
    const double cores = job.cpu_share * static_cast<double>(r.req_cpus) /
                         static_cast<double>(job.placements.size() > 0 ? job.placements.size() : 1);
    const double mem = job.mem_share * static_cast<double>(r.req_mem_mib) /
                       static_cast<double>(job.placements.size() > 0 ? job.placements.size() : 1);
    for (const Placement& p : job.placements) {
      std::vector<Sample> cpu, rss;
      SampleRun(r.start_ms, to, kJobSeriesStepMs, cpu, [&](int64_t) {
        return std::round(cores * (0.9 + 0.002 * static_cast<double>(random() % 100)) * 100) / 100;
      });
      SampleRun(r.start_ms, to, kJobSeriesStepMs, rss, [&](int64_t) { return std::round(mem); });
      const std::string device = "job/" + r.job_id;
      writer.Add({kCompute, NodeName(p.node), device, "job.cpu_used_cores"}, std::move(cpu));
      writer.Add({kCompute, NodeName(p.node), device, "job.mem_used_mib"}, std::move(rss));
    }
  }
}

// ----------------------------------------------------------------------------------------------
// The two ways to a page.

struct Page {
  std::vector<JobRecord> jobs;
  std::vector<JobWithUsage> details;
  double list_ms = 0;
  double usage_ms = 0;
};

// The job list's SQL before migration 4: no index serves its ORDER BY, so every job of the
// compute is sorted for each page.
Result<std::vector<JobRecord>> OldListJobs(expanse::store::sqlite_internal::Connection& db,
                                           int offset) {
  using expanse::store::sqlite_internal::kJobColumns;
  const std::string sql =
      "SELECT " + std::string(kJobColumns) +
      " FROM jobs WHERE compute_id IN (?1) ORDER BY CASE WHEN start_ms = 0 THEN submit_ms ELSE "
      "start_ms END DESC, job_id, compute_id LIMIT ?2 OFFSET ?3";
  EXPANSE_ASSIGN_OR_RETURN(
      auto rows, db.Query(sql, std::string_view(kCompute), int64_t{kPageSize}, int64_t{offset}));
  std::vector<JobRecord> jobs;
  while (true) {
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
    if (!has_row)
      break;
    jobs.push_back(expanse::store::sqlite_internal::ReadJobRecord(rows));
  }
  return jobs;
}

// The route's loop before issue 17, as it was: per job two store reads and ComputeJobUsage,
// which asks the telemetry store one series at a time.
Page OldPage(expanse::store::sqlite_internal::Connection& db, expanse::store::JobStore& store,
             expanse::tsdb::Tsdb& tsdb, int offset, int64_t now_ms) {
  Page page;
  auto start = std::chrono::steady_clock::now();
  auto jobs = OldListJobs(db, offset);
  if (!jobs.ok())
    Die("old ListJobs", jobs.status());
  page.jobs = std::move(jobs).value();
  page.list_ms = MsSince(start);
  start = std::chrono::steady_clock::now();
  for (const JobRecord& job : page.jobs) {
    auto allocations = store.GpuAllocations(job.compute_id, job.job_id);
    if (!allocations.ok())
      Die("GpuAllocations", allocations.status());
    auto events = store.NodeEvents(job.compute_id, job.job_id);
    if (!events.ok())
      Die("NodeEvents", events.status());
    JobWithUsage details{expanse::server::JobHosts(*allocations, *events), {}};
    auto usage = expanse::server::ComputeJobUsage(tsdb, job, *allocations, details.hosts, now_ms);
    if (!usage.ok())
      Die("ComputeJobUsage", usage.status());
    details.usage = *usage;
    page.details.push_back(std::move(details));
  }
  page.usage_ms = MsSince(start);
  return page;
}

// The route now.
Page NewPage(expanse::store::JobStore& store, expanse::tsdb::Tsdb& tsdb, int offset,
             int64_t now_ms) {
  Page page;
  expanse::store::JobFilter filter;
  filter.compute_ids = {kCompute};
  filter.limit = kPageSize;
  filter.offset = offset;
  auto start = std::chrono::steady_clock::now();
  auto jobs = store.ListJobs(filter);
  if (!jobs.ok())
    Die("ListJobs", jobs.status());
  page.jobs = std::move(jobs).value();
  page.list_ms = MsSince(start);
  start = std::chrono::steady_clock::now();
  auto details = expanse::server::JobsWithUsage(store, tsdb, page.jobs, now_ms);
  if (!details.ok())
    Die("JobsWithUsage", details.status());
  page.details = std::move(details).value();
  page.usage_ms = MsSince(start);
  return page;
}

bool SameUsage(const JobUsage& a, const JobUsage& b) {
  return a.gpus_allocated == b.gpus_allocated && a.gpus_active == b.gpus_active &&
         a.has_gpu_samples == b.has_gpu_samples && a.sm_mean == b.sm_mean &&
         a.sm_peak == b.sm_peak && a.gpu_mem_peak_mib == b.gpu_mem_peak_mib &&
         a.idle_gpu_hours == b.idle_gpu_hours && a.allocated_gpu_hours == b.allocated_gpu_hours &&
         a.idle_tail_ms == b.idle_tail_ms && a.cpu_efficiency == b.cpu_efficiency &&
         a.mem_efficiency == b.mem_efficiency;
}

bool SamePage(const Page& a, const Page& b) {
  if (a.jobs.size() != b.jobs.size() || a.details.size() != b.details.size())
    return false;
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    if (a.jobs[i].job_id != b.jobs[i].job_id || a.details[i].hosts != b.details[i].hosts ||
        !SameUsage(a.details[i].usage, b.details[i].usage))
      return false;
  }
  return true;
}

struct Timing {
  std::vector<double> total, list, usage;
  void Add(const Page& page) {
    total.push_back(page.list_ms + page.usage_ms);
    list.push_back(page.list_ms);
    usage.push_back(page.usage_ms);
  }
};

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
      options.jobs = std::max(kPageSize, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      options.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--keep") == 0) {
      options.keep = true;
    } else {
      std::fprintf(stderr, "usage: bench_jobs_list [--jobs N] [--rounds N] [--keep]\n");
      std::exit(2);
    }
  }
  return options;
}

std::string TempDir() {
  char pattern[] = "/tmp/bench_jobs_list_XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return pattern;
}

uint64_t TreeBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file())
      bytes += entry.file_size();
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  const std::string dir = TempDir();
  const auto generation_start = std::chrono::steady_clock::now();

  int64_t now_ms = 0;
  const std::vector<SimJob> jobs = Simulate(options, now_ms);
  const std::unique_ptr<expanse::store::Store> store =
      expanse::bench::OpenStoreWithCompute(dir, kCompute, kStartMs);
  WriteJobs(store->Jobs(), jobs);
  const double store_s = Seconds(std::chrono::steady_clock::now() - generation_start);

  expanse::ManualClock clock(now_ms);
  uint64_t samples = 0;
  {
    auto tsdb = expanse::tsdb::Tsdb::Open({.directory = dir + "/tsdb"}, clock);
    if (!tsdb.ok())
      Die("Tsdb::Open", tsdb.status());
    TelemetryWriter writer(**tsdb);
    WriteGpuSeries(writer, jobs, now_ms);
    WriteJobSeries(writer, jobs, now_ms);
    writer.Send();
    Check((*tsdb)->Flush(), "Flush");
    samples = writer.samples();
  }
  // Opened again, as a server that restarted: everything is in the chunk store.
  auto tsdb = expanse::tsdb::Tsdb::Open({.directory = dir + "/tsdb"}, clock);
  if (!tsdb.ok())
    Die("Tsdb::Open", tsdb.status());
  const double generation_s = Seconds(std::chrono::steady_clock::now() - generation_start);
  auto sqlite = expanse::store::sqlite_internal::SqliteConnection::Open(dir + "/store.db", 5000);
  if (!sqlite.ok())
    Die("SqliteConnection::Open", sqlite.status());
  expanse::store::sqlite_internal::Connection db(*std::move(sqlite));

  size_t allocations = 0;
  for (const SimJob& job : jobs) {
    for (const Placement& p : job.placements)
      allocations += p.gpus.size();
  }
  const auto stats = (*tsdb)->GetStats();
  std::printf(
      "data: %d jobs (%.1f GPUs per job), %zu GPU allocations, %d nodes x %d GPUs, "
      "%.1f days of history\n",
      options.jobs, static_cast<double>(allocations) / static_cast<double>(jobs.size()),
      allocations, kNodes, kGpusPerNode,
      static_cast<double>(now_ms - kStartMs) / (24.0 * 3600 * 1000));
  std::printf("telemetry: %.1f M samples in %llu series, %llu chunks; %.0f MB on disk in all\n",
              static_cast<double>(samples) / 1e6, static_cast<unsigned long long>(stats.series),
              static_cast<unsigned long long>(stats.chunks),
              static_cast<double>(TreeBytes(dir)) / 1e6);
  std::printf("generated in %.1f s (job store %.1f s)\n\n", generation_s, store_s);

  const std::pair<const char*, int> pages[] = {
      {"first", 0}, {"middle", options.jobs / 2}, {"last", options.jobs - kPageSize}};
  std::printf("page of %d jobs with usage, median of %d rounds (old and new interleaved), ms:\n",
              kPageSize, options.rounds);
  std::printf("%-8s %8s | %9s %9s %9s | %9s %9s %9s | %7s\n", "page", "offset", "old total",
              "old list", "old usage", "new total", "new list", "new usage", "ratio");
  bool identical = true;
  for (const auto& [name, offset] : pages) {
    Timing old_timing, new_timing;
    // One untimed round each: the first touch of a page reads its pages into the cache.
    identical = SamePage(OldPage(db, store->Jobs(), **tsdb, offset, now_ms),
                         NewPage(store->Jobs(), **tsdb, offset, now_ms)) &&
                identical;
    for (int round = 0; round < options.rounds; ++round) {
      old_timing.Add(OldPage(db, store->Jobs(), **tsdb, offset, now_ms));
      new_timing.Add(NewPage(store->Jobs(), **tsdb, offset, now_ms));
    }
    const double old_ms = Median(old_timing.total);
    const double new_ms = Median(new_timing.total);
    std::printf("%-8s %8d | %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f | %6.1fx\n", name, offset, old_ms,
                Median(old_timing.list), Median(old_timing.usage), new_ms, Median(new_timing.list),
                Median(new_timing.usage), old_ms / new_ms);
  }
  std::printf("\nold and new pages identical (jobs, hosts, every usage number): %s\n",
              identical ? "yes" : "NO");
  if (options.keep) {
    std::printf("data kept in %s\n", dir.c_str());
  } else {
    std::filesystem::remove_all(dir);
  }
  return identical ? 0 : 1;
}
