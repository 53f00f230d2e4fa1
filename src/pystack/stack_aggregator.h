// Folds Python stack samples per job into fixed windows and hands closed windows out as the
// ingest batch's "stacks" entries (docs/formats/ingest-batch.md), which the sampler writes to
// the spool as `py_stacks` records (docs/formats/spool.md).
//
// Memory is bounded three ways: distinct stacks per job and window, jobs per window, and an
// estimate of all bytes held. Past a bound, samples still count, into the one stack
// `<other>:<other>:0` of their job (or are dropped and counted when the job itself does not
// fit), so totals stay right while detail is lost.
#ifndef EXPANSE_PYSTACK_STACK_AGGREGATOR_H_
#define EXPANSE_PYSTACK_STACK_AGGREGATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "pystack/stack_model.h"
#include "wire/records.h"

namespace expanse::pystack {

// The stack samples past a bound are counted into.
inline constexpr char kOtherStack[] = "<other>:<other>:0";

struct StackAggregatorOptions {
  int64_t window_ms = 60000;  // windows are [k*window_ms, (k+1)*window_ms) in Unix ms
  // ... shifted by this: a live burst's one window starts at the controller's trigger time
  // (docs/pystacks.md, "Live bursts"), the same on every node of the job.
  int64_t window_origin_ms = 0;
  std::size_t max_stacks_per_job_window = 2000;
  std::size_t max_jobs_per_window = 256;
  // Estimated bytes of everything held (folded text plus a fixed cost per entry), all windows.
  std::size_t max_bytes = 32 << 20;
  // Windows not yet taken; a newer one beyond this discards the oldest (TakeClosed not called).
  std::size_t max_open_windows = 4;
  std::size_t max_folded_bytes = 16384;  // the ingest limit on `folded`
};

struct StackAggregatorStats {
  uint64_t threads_counted = 0;         // thread samples counted, <other> included
  uint64_t threads_without_frames = 0;  // skipped: nothing to fold
  uint64_t threads_into_other = 0;      // counted as <other>: the job's window was full
  uint64_t threads_dropped_jobs = 0;    // dropped: the window already held max jobs
  uint64_t threads_dropped_late = 0;    // dropped: their window was already handed out
  uint64_t windows_discarded = 0;       // open windows dropped for being too many
};

// Not thread-safe; the sampler owns one.
class StackAggregator {
 public:
  explicit StackAggregator(StackAggregatorOptions options = {});

  // Counts every thread of `stacks` with frames once, under (window of now_ms, folded stack,
  // thread state, gpu_idle) for job `job_id` on `host`. A sample for a window already handed out
  // by TakeClosed/TakeAll is dropped (counted): ingest replaces a window's counts rather than
  // adding to them, so a second, partial entry would overwrite the first.
  void Add(const std::string& job_id, const std::string& host, int64_t now_ms,
           const ProcessStacks& stacks, bool gpu_idle);

  // The entries of every window that ended at or before `now_ms`, removed from memory, as
  // ingest stack records ordered by window, job, host, folded, state, gpu_idle.
  std::vector<wire::StackRecord> TakeClosed(int64_t now_ms);
  // Every window, closed or not (shutdown).
  std::vector<wire::StackRecord> TakeAll();

  const StackAggregatorStats& stats() const { return stats_; }
  std::size_t open_windows() const { return windows_.size(); }
  std::size_t bytes_held() const { return bytes_held_; }

 private:
  // (folded, thread_state, gpu_idle) -> count
  using StackKey = std::tuple<std::string, ThreadState, bool>;
  struct JobWindow {
    std::map<StackKey, uint64_t> counts;
    std::size_t distinct = 0;  // keys other than <other>
  };
  // (job_id, host) -> stacks
  using Window = std::map<std::pair<std::string, std::string>, JobWindow>;

  void CountThread(JobWindow& job, std::string folded, ThreadState state, bool gpu_idle);
  void DiscardOldestWindow();
  void AppendWindow(int64_t start_ms, Window& window, std::vector<wire::StackRecord>& out);

  StackAggregatorOptions options_;
  std::map<int64_t, Window> windows_;  // by window start
  // Windows starting before this were handed out; their samples come too late.
  int64_t taken_before_ms_ = 0;
  std::size_t bytes_held_ = 0;
  StackAggregatorStats stats_;
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_STACK_AGGREGATOR_H_
