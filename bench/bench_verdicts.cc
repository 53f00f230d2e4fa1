// Issue 19's budgets for verdicts, measured (figures: docs/performance.md):
//
//   1. Verdicts for a finished 24 h, 8-GPU job within 200 ms of server time: the work of
//      GET /api/v1/computes/:id/jobs/:job/verdicts, i.e. GatherJobCells over the telemetry store
//      and JobVerdicts (rules, and the stacks of the underused intervals from the job store).
//      The job's history is written into a real SQLite job store and a real telemetry store in
//      a temporary directory, the telemetry store is reopened (its chunks on disk, as after a
//      restart), and the verdicts are computed once cold and then `--rounds` times.
//   2. Live detection within two sample flushes after the threshold: LiveDetector fed one flush
//      (10 s of 1 Hz samples per GPU) at a time for `--nodes` nodes of 8 GPUs, every one running
//      a job, one of which hangs (utilisation 100 %, power near idle, SM activity ~0) at a known
//      time. Prints how many flushes after the threshold its trigger came and the detector's
//      CPU time per flush of the whole cluster.
//
// A plain program, not a Google Benchmark, that never asserts timings: run it from a Release
// build, `bench_verdicts [--rounds N] [--nodes N] [--keep]`. It exits 1 only when the verdicts
// or the trigger are not the ones the data was made to give (then the figures mean nothing).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/live_detector.h"
#include "bench_common.h"
#include "core/clock.h"
#include "server/job_usage.h"
#include "server/verdict_evidence.h"
#include "store/sqlite_store.h"
#include "store/store.h"
#include "tsdb/tsdb.h"

namespace {

using expanse::bench::Median;
using expanse::bench::MsSince;

using expanse::Status;
using expanse::server::Verdict;
using expanse::store::GpuAllocation;
using expanse::store::JobNodeEvent;
using expanse::store::JobRecord;
using expanse::tsdb::Sample;
using expanse::tsdb::SeriesKey;

constexpr int64_t kStartMs = 1'764'547'200'000;  // 2025-12-01T00:00:00Z
constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kRunMs = 24 * kHourMs;
constexpr int64_t kGpuStepMs = 10'000;
constexpr int64_t kJobSeriesStepMs = 30'000;
constexpr int kGpus = 8;
constexpr double kMemoryTotalMib = 143'771;  // an H200's, as NVML reports it
constexpr const char* kCompute = "cmp_bench";
constexpr const char* kHost = "gpu-001";
constexpr const char* kJob = "424242";

struct Options {
  int rounds = 20;
  int nodes = 512;
  bool keep = false;
};

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "bench_verdicts: %s: %s\n", what.c_str(), status.message().c_str());
  std::exit(2);
}

void Check(const Status& status, const std::string& what) {
  if (!status.ok())
    Die(what, status);
}

std::string Uuid(int node, int gpu) {
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%08x-5e1f-4d2a-9b3c-%012x", 0x1000u + unsigned(node),
                unsigned(gpu));
  return uuid;
}

// ----------------------------------------------------------------------------------------------
// 1. A finished 24 h job on 8 GPUs.
//
// GPUs 0-3 work the whole day; 4 and 5 are never touched (over_allocated); 6 works for 20 h and
// then hangs for 4 h (stuck); 7 works, but in every third hour only at 20 % while the job's
// CPUs are saturated (host_bound, from the underused intervals the series leave open).

struct GpuReading {
  double util, power, mem, processes, sm_active;
};

GpuReading ReadingAt(int gpu, int64_t t, std::mt19937_64& random) {
  const double jitter = static_cast<double>(random() % 7) - 3.0;
  const int64_t hour = (t - kStartMs) / kHourMs;
  if (gpu == 4 || gpu == 5)
    return {0, 72, 0, 0, 0};
  if (gpu == 6 && hour >= 20)
    return {100, 95, 61'000, 1, 0.01};
  if (gpu == 7 && hour % 3 == 2)
    return {20 + jitter, 180, 30'000, 1, 0.12};
  return {90 + jitter, 560 + 5 * jitter, 61'000, 1, 0.62 + 0.01 * jitter};
}

bool CpuSaturatedAt(int64_t t) { return ((t - kStartMs) / kHourMs) % 3 == 2; }

template <typename Value>
std::vector<Sample> SampleRun(int64_t step_ms, Value value) {
  std::vector<Sample> out;
  for (int64_t t = kStartMs; t < kStartMs + kRunMs; t += step_ms)
    out.push_back({t, value(t)});
  return out;
}

uint64_t WriteJobHistory(expanse::store::JobStore& jobs, expanse::tsdb::Tsdb& tsdb) {
  JobRecord r;
  r.compute_id = kCompute;
  r.job_id = kJob;
  r.name = "train";
  r.user = "alice";
  r.account = "ml";
  r.partition = "gpu";
  r.state = "COMPLETED";
  r.nodes = kHost;
  r.submit_ms = kStartMs - 60'000;
  r.start_ms = kStartMs;
  r.end_ms = kStartMs + kRunMs;
  r.req_nodes = 1;
  r.req_cpus = 16;
  r.req_gpus = kGpus;
  r.req_mem_mib = 256'000;
  r.time_limit_s = 48 * 3600;
  r.observed_ms = r.end_ms;
  Check(jobs.UpsertJobs({r}), "UpsertJobs");
  std::vector<GpuAllocation> allocations;
  for (int g = 0; g < kGpus; ++g)
    allocations.push_back({kCompute, kJob, kHost, Uuid(0, g), g, g, r.start_ms, r.end_ms});
  Check(jobs.PutGpuAllocations(allocations), "PutGpuAllocations");
  Check(jobs.AddNodeEvents({{kCompute, kJob, kHost, "start", r.start_ms},
                            {kCompute, kJob, kHost, "end", r.end_ms}}),
        "AddNodeEvents");

  expanse::tsdb::Batch batch;
  uint64_t samples = 0;
  std::mt19937_64 random(19);
  for (int g = 0; g < kGpus; ++g) {
    std::vector<GpuReading> readings;
    for (int64_t t = kStartMs; t < kStartMs + kRunMs; t += kGpuStepMs)
      readings.push_back(ReadingAt(g, t, random));
    const auto series = [&](double GpuReading::*field) {
      std::vector<Sample> out;
      for (size_t i = 0; i < readings.size(); ++i)
        out.push_back({kStartMs + static_cast<int64_t>(i) * kGpuStepMs, readings[i].*field});
      return out;
    };
    const std::pair<const char*, double GpuReading::*> metrics[] = {
        {"gpu.sm_util", &GpuReading::util},
        {"gpu.power_w", &GpuReading::power},
        {"gpu.mem_used_mib", &GpuReading::mem},
        {"gpu.processes", &GpuReading::processes},
        {"gpu.sm_active", &GpuReading::sm_active}};
    for (const auto& [metric, field] : metrics) {
      batch.Add(SeriesKey{kCompute, kHost, Uuid(0, g), metric}, series(field));
      samples += readings.size();
    }
  }
  const std::string device = std::string("job/") + kJob;
  auto cpu = SampleRun(kJobSeriesStepMs, [](int64_t t) { return CpuSaturatedAt(t) ? 15.9 : 7.5; });
  // GPUs 0-3, 6 and 7 hold a process all day.
  auto gpu_processes = SampleRun(kJobSeriesStepMs, [](int64_t) { return 6.0; });
  samples += cpu.size() + gpu_processes.size();
  batch.Add(SeriesKey{kCompute, kHost, device, "job.cpu_used_cores"}, cpu);
  batch.Add(SeriesKey{kCompute, kHost, device, "job.gpu_processes"}, gpu_processes);
  auto appended = tsdb.Append("bench-verdicts", batch, expanse::tsdb::Tsdb::Ack::kReceived);
  if (!appended.ok())
    Die("Append", appended.status());
  Check(tsdb.Flush(), "Flush");
  return samples;
}

struct VerdictRun {
  std::vector<Verdict> verdicts;
  double gather_ms = 0;
  double rules_ms = 0;
};

VerdictRun ComputeVerdicts(expanse::store::JobStore& jobs, expanse::tsdb::Tsdb& tsdb,
                           const std::map<std::string, expanse::server::GpuModel>& models) {
  // What the route does, from the job's id on.
  const auto start = std::chrono::steady_clock::now();
  auto job = jobs.GetJob(kCompute, kJob);
  if (!job.ok())
    Die("GetJob", job.status());
  auto allocations = jobs.GpuAllocations(kCompute, kJob);
  if (!allocations.ok())
    Die("GpuAllocations", allocations.status());
  auto events = jobs.NodeEvents(kCompute, kJob);
  if (!events.ok())
    Die("NodeEvents", events.status());
  const std::vector<std::string> hosts = expanse::server::JobHosts(*allocations, *events);
  auto cells = expanse::server::GatherJobCells(tsdb, *job, *allocations, hosts, models,
                                               job->end_ms + 60'000);
  if (!cells.ok())
    Die("GatherJobCells", cells.status());
  VerdictRun run;
  run.gather_ms = MsSince(start);
  const auto rules_start = std::chrono::steady_clock::now();
  auto verdicts = expanse::server::JobVerdicts(jobs, *job, *cells, {});
  if (!verdicts.ok())
    Die("JobVerdicts", verdicts.status());
  run.rules_ms = MsSince(rules_start);
  run.verdicts = *std::move(verdicts);
  return run;
}

bool BenchVerdicts(const Options& options) {
  char dir_template[] = "/tmp/bench-verdicts-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::unique_ptr<expanse::store::Store> store =
      expanse::bench::OpenStoreWithCompute(dir, kCompute, kStartMs);

  expanse::ManualClock clock(kStartMs + kRunMs + 60'000);
  uint64_t samples = 0;
  {
    auto tsdb = expanse::tsdb::Tsdb::Open({.directory = dir + "/tsdb"}, clock);
    if (!tsdb.ok())
      Die("Tsdb::Open", tsdb.status());
    samples = WriteJobHistory(store->Jobs(), **tsdb);
  }
  auto tsdb = expanse::tsdb::Tsdb::Open({.directory = dir + "/tsdb"}, clock);
  if (!tsdb.ok())
    Die("Tsdb::Open", tsdb.status());
  std::map<std::string, expanse::server::GpuModel> models;
  for (int g = 0; g < kGpus; ++g)
    models[Uuid(0, g)] = {"NVIDIA H200", kMemoryTotalMib};

  std::printf("1. verdicts of a finished 24 h job on %d GPUs of one node\n", kGpus);
  std::printf("   data: %.2f M samples (5 GPU series at 10 s, 2 cgroup series at 30 s)\n",
              static_cast<double>(samples) / 1e6);
  const VerdictRun cold = ComputeVerdicts(store->Jobs(), **tsdb, models);
  std::vector<double> total, gather, rules;
  for (int i = 0; i < options.rounds; ++i) {
    const VerdictRun run = ComputeVerdicts(store->Jobs(), **tsdb, models);
    gather.push_back(run.gather_ms);
    rules.push_back(run.rules_ms);
    total.push_back(run.gather_ms + run.rules_ms);
  }
  std::printf("   verdicts:");
  std::set<std::string> codes;
  for (const Verdict& v : cold.verdicts) {
    codes.insert(v.code);
    std::printf(" %s (%.1f h)", v.code.c_str(), static_cast<double>(v.to_ms - v.from_ms) / 3.6e6);
  }
  std::printf("\n");
  std::printf("   first (cold) %.1f ms: gather %.1f + rules and stacks %.1f\n",
              cold.gather_ms + cold.rules_ms, cold.gather_ms, cold.rules_ms);
  std::printf(
      "   median of %d  %.1f ms: gather %.1f + rules and stacks %.1f (budget 200 ms: %.2fx)\n",
      options.rounds, Median(total), Median(gather), Median(rules), Median(total) / 200.0);
  if (options.keep) {
    std::printf("   data kept in %s\n", dir.c_str());
  } else {
    std::filesystem::remove_all(dir);
  }
  const bool expected =
      codes.contains("over_allocated") && codes.contains("stuck") && codes.contains("host_bound");
  if (!expected)
    std::printf(
        "   NOT the verdicts the data was made to give (over_allocated, stuck, host_bound)\n");
  return expected;
}

// ----------------------------------------------------------------------------------------------
// 2. Live detection latency.

constexpr int64_t kFlushMs = 10'000;

bool BenchLiveDetection(const Options& options) {
  expanse::agent::LiveDetectorOptions detector_options;  // stuck after 10 min, the default
  expanse::agent::LiveDetector detector(detector_options);
  const int64_t t0 = kStartMs;
  std::set<std::string> running;
  for (int n = 0; n < options.nodes; ++n) {
    const std::string job = std::to_string(1000 + n);
    running.insert(job);
    for (int g = 0; g < kGpus; ++g) {
      expanse::wire::GpuAllocationRecord a;
      a.job_id = job;
      a.host = "node" + std::to_string(n);
      a.gpu_uuid = Uuid(n, g);
      a.gpu_index = g;
      a.gpu_minor = g;
      a.from_ms = t0;
      a.slurm_job_id = 1000 + n;
      detector.NoteAllocation(a, t0);
    }
  }
  // Node 0's job hangs on its GPU 3 from `hang_ms` on; everything else works.
  const int64_t hang_ms = t0 + 5 * 60'000;
  const int64_t threshold_ms = hang_ms + detector_options.stuck_after_ms;
  std::vector<double> flush_ms;
  int64_t trigger_flush_end = 0;
  for (int64_t flush_start = t0; flush_start < threshold_ms + 10 * kFlushMs;
       flush_start += kFlushMs) {
    std::vector<expanse::wire::SeriesRecord> series;
    for (int n = 0; n < options.nodes; ++n) {
      const std::string host = "node" + std::to_string(n);
      for (int g = 0; g < kGpus; ++g) {
        const bool hung = n == 0 && g == 3 && flush_start >= hang_ms;
        const std::pair<const char*, double> readings[] = {{"gpu.sm_util", hung ? 100.0 : 92.0},
                                                           {"gpu.power_w", hung ? 90.0 : 600.0},
                                                           {"gpu.processes", 1.0},
                                                           {"gpu.sm_active", hung ? 0.0 : 0.6}};
        for (const auto& [metric, value] : readings) {
          expanse::wire::SeriesRecord s;
          s.host = host;
          s.device = Uuid(n, g);
          s.metric = metric;
          s.t0 = flush_start;
          s.dt.assign(10, 1000);
          s.dt[0] = 0;
          s.v.assign(10, value);
          series.push_back(std::move(s));
        }
      }
    }
    const int64_t now_ms = flush_start + kFlushMs;
    const auto start = std::chrono::steady_clock::now();
    detector.NoteSeries(series, now_ms);
    const std::vector<expanse::agent::LiveTrigger> triggers = detector.TakeTriggers(now_ms);
    flush_ms.push_back(MsSince(start));
    for (const auto& t : triggers) {
      if (t.job_id == "1000" && t.reason == "stuck" && trigger_flush_end == 0)
        trigger_flush_end = now_ms;
    }
  }
  std::printf("\n2. live detection: %d nodes x %d GPUs, one job hangs; stuck after %lld s\n",
              options.nodes, kGpus, static_cast<long long>(detector_options.stuck_after_ms / 1000));
  std::printf("   detector per flush of the whole cluster: median %.2f ms, max %.2f ms\n",
              Median(flush_ms), *std::max_element(flush_ms.begin(), flush_ms.end()));
  if (trigger_flush_end == 0) {
    std::printf("   NO trigger for the hung job\n");
    return false;
  }
  const double flushes =
      std::ceil(static_cast<double>(trigger_flush_end - threshold_ms) / kFlushMs);
  std::printf(
      "   trigger with the flush ending %lld s after the threshold: %.0f flush(es) of %lld s "
      "(budget 2)\n",
      static_cast<long long>((trigger_flush_end - threshold_ms) / 1000), flushes,
      static_cast<long long>(kFlushMs / 1000));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      options.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--nodes" && i + 1 < argc) {
      options.nodes = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--keep") {
      options.keep = true;
    } else {
      std::fprintf(stderr, "usage: bench_verdicts [--rounds N] [--nodes N] [--keep]\n");
      return 2;
    }
  }
  const bool verdicts = BenchVerdicts(options);
  const bool live = BenchLiveDetection(options);
  return verdicts && live ? 0 : 1;
}
