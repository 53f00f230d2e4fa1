// JobThreads: what a job's threads say about waiting, read from /proc within a node-wide budget.
//
// Two series per job, device "job/<id>" (docs/formats/metrics.md):
// - `job.cpu_wait_cores`: how many cores' worth of time the job's threads spent runnable but
//   waiting for a CPU (the run_delay of each thread's /proc/<tid>/schedstat), so a job that
//   wants more CPU than it gets shows it even where the host is oversubscribed and its
//   `job.cpu_used_cores` stays below its allocation.
// - `job.uninterruptible_some`: 1 when some thread of the job was in uninterruptible sleep
//   (state D in /proc/<tid>/task/<tid>/stat, most often waiting for a disk or a network file
//   system), else 0. Its mean over an interval estimates the share of time some task was blocked
//   there, which approximates cgroup v2's io.pressure "some" (D also covers some kernel locks and
//   memory reclaim), so that cgroup v1 nodes can still tell a job waiting on its files.
//
// Why a budget: the two files cost the kernel ~20 us a thread to build (bench/bench_job_threads),
// so a node running a thousand job threads, read every second, would cost the sampler ~2 % of a
// core against its 0.5 % budget. At most `reads_per_sample` threads are read per sample across
// the node (or one per job, where there are more jobs). Where the jobs have fewer threads,
// every thread is read at every sample. Where they have more, each job reads one thread and a
// share of the rest of the budget in proportion to its other threads, in turn (round robin by
// thread id), so that every thread is read about every threads / budget samples. Each thread
// keeps its last reading: its run-queue wait is a rate over the time since its previous
// reading, and the job's figure sums the threads' latest rates (a moving figure over that
// round); a thread's state read at its turn stands for it until its next turn. Listing the
// threads still costs about a microsecond a thread at every sample.
#ifndef EXPANSE_TELEMETRY_JOB_THREADS_H_
#define EXPANSE_TELEMETRY_JOB_THREADS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/series_buffer.h"

namespace expanse::telemetry {

struct JobThreadOptions {
  std::string proc_root = "/proc";  // /proc/<tid>/schedstat, /proc/<tid>/task/<tid>/stat
  bool cpu_wait = true;             // job.cpu_wait_cores
  bool uninterruptible = true;      // job.uninterruptible_some
  // Threads read per sample, all jobs together (each job at least one): 1-2 ms of the
  // sampler's CPU a second on the 2-core test VM with the listing (docs/performance.md).
  size_t reads_per_sample = 64;
};

class JobThreads {
 public:
  explicit JobThreads(JobThreadOptions options = {}) : options_(std::move(options)) {}

  // Reads the threads this sample's budget allows, of the jobs in `threads` (job id -> its
  // thread ids, as the job's cgroups list them now), and adds each job's figures to `buffer` for
  // `host` at `now_ms`. A job no longer in `threads`, or listed without threads, is forgotten.
  void Sample(const std::map<uint32_t, std::vector<int>>& threads, int64_t now_ms,
              const std::string& host, SeriesBuffer& buffer);

  bool enabled() const { return options_.cpu_wait || options_.uninterruptible; }
  // Threads read at the last Sample, all jobs together.
  size_t last_reads() const { return last_reads_; }

 private:
  struct Reading {
    int64_t at_ms = 0;
    std::optional<uint64_t> waiting_ns;  // run-queue wait so far, at at_ms
    std::optional<double> wait_cores;    // its rate since the thread's previous reading
    char state = 0;                      // the state letter at its last read, 0 when unknown
  };
  struct Job {
    std::map<int, Reading> threads;  // by thread id
    int cursor = 0;                  // the last thread id read: the next turn starts above it
    bool waits_read = false;         // a run-queue wait was read at the job's last sample
  };
  // Reads `quota` of `tids` (sorted), from above the job's cursor, and adds the job's figures.
  void SampleJob(uint32_t job, const std::vector<int>& tids, size_t quota, int64_t now_ms,
                 const std::string& host, SeriesBuffer& buffer);
  void ReadThread(int tid, int64_t now_ms, bool read_state, Reading& reading) const;

  JobThreadOptions options_;
  std::map<uint32_t, Job> jobs_;
  size_t last_reads_ = 0;
};

}  // namespace expanse::telemetry

#endif  // EXPANSE_TELEMETRY_JOB_THREADS_H_
