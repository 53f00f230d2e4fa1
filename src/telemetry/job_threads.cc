#include "telemetry/job_threads.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "telemetry/proc_thread_files.h"

namespace expanse::telemetry {
namespace {

// Up to `size` bytes of a small /proc file, with one open, read and close (no stdio buffer:
// two such files per job thread); 0 when it cannot be read.
size_t ReadSmallProcFile(const std::string& path, char* text, size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  const ssize_t n = ::read(fd, text, size);
  ::close(fd);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

// The state letter of a thread's stat, 0 when it cannot be read (the thread ended).
char ReadThreadState(const std::string& path) {
  char text[512];
  return ParseThreadState(std::string_view(text, ReadSmallProcFile(path, text, sizeof(text))));
}

// The run-queue wait (ns) of a thread's schedstat.
std::optional<uint64_t> ReadRunQueueWaitNs(const std::string& path) {
  char text[128];
  return ParseRunQueueWaitNs(std::string_view(text, ReadSmallProcFile(path, text, sizeof(text))));
}

}  // namespace

void JobThreads::Sample(const std::map<uint32_t, std::vector<int>>& threads, int64_t now_ms,
                        const std::string& host, SeriesBuffer& buffer) {
  std::erase_if(jobs_, [&](const auto& job) { return !threads.contains(job.first); });
  last_reads_ = 0;
  if (!enabled())
    return;
  size_t total = 0, jobs = 0;
  for (const auto& [job, tids] : threads) {
    total += tids.size();
    jobs += !tids.empty();
  }
  const size_t budget = std::max<size_t>(options_.reads_per_sample, 1);
  for (const auto& [job, listed] : threads) {
    if (listed.empty()) {
      jobs_.erase(job);  // no thread to be seen (between steps): the next listing starts afresh
      continue;
    }
    // Over the budget, each job reads one thread and a share of the rest of the budget in
    // proportion to its other threads, so every thread is read about equally often and the
    // node reads at most max(budget, jobs) threads.
    size_t quota = listed.size();
    if (total > budget) {
      quota = 1;
      if (jobs < budget)
        quota += (budget - jobs) * (listed.size() - 1) / (total - jobs);
    }
    std::vector<int> tids = listed;
    std::sort(tids.begin(), tids.end());
    tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
    SampleJob(job, tids, quota, now_ms, host, buffer);
  }
}

void JobThreads::ReadThread(int tid, int64_t now_ms, bool read_state, Reading& reading) const {
  const std::string dir = options_.proc_root + "/" + std::to_string(tid);
  if (options_.cpu_wait) {
    const std::optional<uint64_t> waiting_ns = ReadRunQueueWaitNs(dir + "/schedstat");
    // A counter that went back is another thread under a reused id: no interval to rate.
    if (waiting_ns && reading.waiting_ns && *waiting_ns >= *reading.waiting_ns &&
        now_ms > reading.at_ms) {
      reading.wait_cores = static_cast<double>(*waiting_ns - *reading.waiting_ns) / 1e6 /
                           static_cast<double>(now_ms - reading.at_ms);
    } else {
      reading.wait_cores.reset();
    }
    reading.waiting_ns = waiting_ns;
  }
  // The thread's own stat: /proc/<tid>/stat has the same state letter, but the kernel builds
  // it by summing the times and faults of every thread of the process, so reading all threads
  // of a thousand-thread process that way grows with the square of its threads.
  if (read_state)
    reading.state = ReadThreadState(dir + "/task/" + std::to_string(tid) + "/stat");
  reading.at_ms = now_ms;
}

void JobThreads::SampleJob(uint32_t job, const std::vector<int>& tids, size_t quota, int64_t now_ms,
                           const std::string& host, SeriesBuffer& buffer) {
  Job& state = jobs_[job];
  // A thread no longer listed ended (or moved): its last reading no longer counts.
  std::erase_if(state.threads, [&](const auto& thread) {
    return !std::binary_search(tids.begin(), tids.end(), thread.first);
  });
  const size_t reads = std::min(quota, tids.size());
  last_reads_ += reads;
  const bool all = reads == tids.size();
  const size_t start =
      all ? 0
          : static_cast<size_t>(std::upper_bound(tids.begin(), tids.end(), state.cursor) -
                                tids.begin());
  const bool waits_before = state.waits_read;
  state.waits_read = false;
  bool blocked = false;
  for (size_t i = 0; i < reads; ++i) {
    const int tid = tids[(start + i) % tids.size()];
    // Reading every thread, one found blocked settles this sample's state, and the rest need
    // not be read. In turns, each thread's state must be read in its turn: it stands for the
    // thread until the next one.
    Reading& reading = state.threads[tid];
    ReadThread(tid, now_ms, options_.uninterruptible && !(all && blocked), reading);
    blocked = blocked || reading.state == 'D';
    state.waits_read = state.waits_read || reading.waiting_ns.has_value();
    state.cursor = tid;
  }

  double wait_cores = 0;
  bool any_wait = false, any_state = false, some_blocked = false;
  for (const auto& [tid, reading] : state.threads) {
    if (reading.wait_cores) {
      wait_cores += *reading.wait_cores;
      any_wait = true;
    }
    if (reading.state != 0) {
      any_state = true;
      some_blocked = some_blocked || reading.state == 'D';
    }
  }
  // Reading every thread twice in a row, none with an interval (all new, or ids reused) waited
  // nothing that can be seen: 0. In turns, a thread not yet read twice is not known to be 0.
  any_wait = any_wait || (all && waits_before && state.waits_read);
  const std::string device = "job/" + std::to_string(job);
  if (options_.uninterruptible && any_state)
    buffer.Add({host, device, "job.uninterruptible_some"}, now_ms, some_blocked ? 1.0 : 0.0);
  if (options_.cpu_wait && any_wait)
    buffer.Add({host, device, "job.cpu_wait_cores"}, now_ms, wait_cores);
}

}  // namespace expanse::telemetry
