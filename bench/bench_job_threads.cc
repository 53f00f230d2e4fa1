// The sampler's per-second cost of reading a job's threads (src/telemetry/job_cgroups.h): one
// cgroup v1 job whose `tasks` lists T real threads of this process (sleeping, so none is in
// uninterruptible sleep and every thread's state is read: the worst case), read through the
// real /proc. Side by side in one run: run-queue wait alone (job.cpu_wait_cores, what the
// sampler read before), thread states alone (job.uninterruptible_some), and both, every thread
// at every sample; then both within the sampler's default budget of thread reads per sample
// (telemetry/job_threads.h), which is what a node pays. Reported per sample; the figures are in
// docs/performance.md.

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "telemetry/job_cgroups.h"
#include "telemetry/series_buffer.h"

namespace {

using expanse::telemetry::JobCgroupOptions;
using expanse::telemetry::JobCgroups;
using expanse::telemetry::SeriesBuffer;

// T threads that sleep on a condition variable until the benchmark ends; their kernel ids.
class SleepingThreads {
 public:
  explicit SleepingThreads(int count) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this] {
        {
          std::lock_guard<std::mutex> lock(mu_);
          tids_.push_back(static_cast<int>(syscall(SYS_gettid)));
        }
        started_.notify_all();
        std::unique_lock<std::mutex> lock(mu_);
        stop_cv_.wait(lock, [this] { return stop_; });
      });
    }
    std::unique_lock<std::mutex> lock(mu_);
    started_.wait(lock, [&] { return static_cast<int>(tids_.size()) == count; });
  }
  ~SleepingThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    for (auto& t : threads_)
      t.join();
  }
  const std::vector<int>& tids() const { return tids_; }

 private:
  std::mutex mu_;
  std::condition_variable started_, stop_cv_;
  bool stop_ = false;
  std::vector<int> tids_;
  std::vector<std::thread> threads_;
};

void Write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::fprintf(stderr, "bench_job_threads: cannot write %s\n", path.c_str());
    std::abort();
  }
}

void SampleJobThreads(benchmark::State& state, bool cpu_wait, bool uninterruptible,
                      bool within_budget = false) {
  const int count = static_cast<int>(state.range(0));
  SleepingThreads threads(count);
  char dir[] = "/tmp/expanse-bench-cgroups-XXXXXX";
  const std::filesystem::path root = mkdtemp(dir);
  const std::filesystem::path job = root / "cpuacct/slurm/uid_0/job_7";
  Write(job / "cpuacct.usage", "1000\n");
  Write(root / "memory/slurm/uid_0/job_7/memory.usage_in_bytes", "1\n");
  std::string tasks;
  for (int tid : threads.tids())
    tasks += std::to_string(tid) + "\n";
  Write(job / "step_0/tasks", tasks);
  JobCgroupOptions options;
  options.cgroup_root = root;
  options.proc_stat = "/proc/stat";
  options.threads.proc_root = "/proc";
  options.threads.cpu_wait = cpu_wait;
  options.threads.uninterruptible = uninterruptible;
  if (!within_budget)
    options.threads.reads_per_sample = 1 << 20;  // every thread at each Sample
  options.rescan_every = 1 << 30;                // the walk is not what is measured
  JobCgroups cgroups(options);
  SeriesBuffer buffer;
  int64_t now_ms = 1000;
  cgroups.Sample(now_ms, "bench", buffer);
  for (auto _ : state) {
    now_ms += 1000;
    cgroups.Sample(now_ms, "bench", buffer);
    benchmark::DoNotOptimize(buffer.Take());
  }
  state.counters["threads"] = count;
  state.counters["read_per_sample"] =
      std::min<double>(count, static_cast<double>(options.threads.reads_per_sample));
  std::filesystem::remove_all(root);
}

void BM_RunQueueWaitOnly(benchmark::State& state) { SampleJobThreads(state, true, false); }
void BM_ThreadStatesOnly(benchmark::State& state) { SampleJobThreads(state, false, true); }
void BM_Both(benchmark::State& state) { SampleJobThreads(state, true, true); }
void BM_BothWithinTheDefaultBudget(benchmark::State& state) {
  SampleJobThreads(state, true, true, true);
}

// Why the sampler reads a thread's state under /proc/<tid>/task/<tid>/: the same letter is in
// /proc/<tid>/stat, but there the kernel sums every thread of the process to build the file.
// One pass over the T threads of one process, each file read raw, either way.
void ReadEachThreadsStat(benchmark::State& state, bool own) {
  const int count = static_cast<int>(state.range(0));
  SleepingThreads threads(count);
  char text[512];
  for (auto _ : state) {
    for (int tid : threads.tids()) {
      const std::string id = std::to_string(tid);
      const std::string path =
          own ? "/proc/" + id + "/task/" + id + "/stat" : "/proc/" + id + "/stat";
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        state.SkipWithError("cannot open a thread's stat");
        return;
      }
      benchmark::DoNotOptimize(::read(fd, text, sizeof(text)));
      ::close(fd);
    }
  }
  state.counters["threads"] = count;
}
void BM_ProcessWideStatOfEachThread(benchmark::State& state) { ReadEachThreadsStat(state, false); }
void BM_OwnStatOfEachThread(benchmark::State& state) { ReadEachThreadsStat(state, true); }

BENCHMARK(BM_ProcessWideStatOfEachThread)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OwnStatOfEachThread)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RunQueueWaitOnly)->Arg(16)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ThreadStatesOnly)->Arg(16)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Both)->Arg(16)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BothWithinTheDefaultBudget)
    ->Arg(16)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
