#include "pystack/stack_aggregator.h"

#include <algorithm>
#include <utility>

namespace expanse::pystack {
namespace {

// The ingest format's upper bound on `count`.
constexpr uint64_t kMaxCount = 1000000000;
// A rough cost of one map entry beyond its text (node, key, pointers), so many tiny stacks
// cannot slip past max_bytes.
constexpr std::size_t kEntryOverheadBytes = 128;

// Floor division: window starts are origin_ms plus multiples of window_ms, also for times
// before the origin.
int64_t WindowStart(int64_t now_ms, int64_t window_ms, int64_t origin_ms) {
  const int64_t since = now_ms - origin_ms;
  int64_t start = since - since % window_ms;
  if (since % window_ms < 0)
    start -= window_ms;
  return origin_ms + start;
}

std::size_t ThreadsWithFrames(const ProcessStacks& stacks) {
  return static_cast<std::size_t>(
      std::count_if(stacks.threads.begin(), stacks.threads.end(),
                    [](const ThreadStack& thread) { return !thread.frames.empty(); }));
}

}  // namespace

StackAggregator::StackAggregator(StackAggregatorOptions options) : options_(options) {
  options_.window_ms = std::max<int64_t>(options_.window_ms, 1);
  options_.max_open_windows = std::max<std::size_t>(options_.max_open_windows, 1);
}

void StackAggregator::Add(const std::string& job_id, const std::string& host, int64_t now_ms,
                          const ProcessStacks& stacks, bool gpu_idle) {
  const std::size_t with_frames = ThreadsWithFrames(stacks);
  stats_.threads_without_frames += stacks.threads.size() - with_frames;
  if (with_frames == 0)
    return;

  const int64_t start = WindowStart(now_ms, options_.window_ms, options_.window_origin_ms);
  // A start of 0 or less cannot be uploaded (ingest wants 0 < start): only a clock near 1970.
  if (start < taken_before_ms_ || start <= 0) {
    stats_.threads_dropped_late += with_frames;
    return;
  }
  auto window_it = windows_.find(start);
  if (window_it == windows_.end()) {
    if (windows_.size() >= options_.max_open_windows) {
      if (start < windows_.begin()->first) {
        stats_.threads_dropped_late += with_frames;
        return;
      }
      DiscardOldestWindow();
    }
    window_it = windows_.emplace(start, Window{}).first;
  }
  Window& window = window_it->second;
  auto job_key = std::make_pair(job_id, host);
  auto job_it = window.find(job_key);
  if (job_it == window.end()) {
    if (window.size() >= options_.max_jobs_per_window) {
      stats_.threads_dropped_jobs += with_frames;
      return;
    }
    bytes_held_ += job_id.size() + host.size() + kEntryOverheadBytes;
    job_it = window.emplace(std::move(job_key), JobWindow{}).first;
  }
  for (const ThreadStack& thread : stacks.threads) {
    if (thread.frames.empty())
      continue;
    CountThread(job_it->second, FoldFrames(thread.frames, options_.max_folded_bytes), thread.state,
                gpu_idle);
  }
}

void StackAggregator::CountThread(JobWindow& job, std::string folded, ThreadState state,
                                  bool gpu_idle) {
  ++stats_.threads_counted;
  StackKey key(std::move(folded), state, gpu_idle);
  auto it = job.counts.find(key);
  if (it == job.counts.end()) {
    const std::size_t cost = std::get<0>(key).size() + kEntryOverheadBytes;
    if (job.distinct >= options_.max_stacks_per_job_window ||
        bytes_held_ + cost > options_.max_bytes) {
      ++stats_.threads_into_other;
      key = StackKey(kOtherStack, state, gpu_idle);
      it = job.counts.find(key);
    }
  }
  if (it == job.counts.end()) {
    const bool other = std::get<0>(key) == kOtherStack;
    bytes_held_ += std::get<0>(key).size() + kEntryOverheadBytes;
    it = job.counts.emplace(std::move(key), 0).first;
    if (!other)
      ++job.distinct;
  }
  it->second = std::min(it->second + 1, kMaxCount);
}

void StackAggregator::DiscardOldestWindow() {
  auto oldest = windows_.begin();
  for (const auto& [job, stacks] : oldest->second) {
    bytes_held_ -= job.first.size() + job.second.size() + kEntryOverheadBytes;
    for (const auto& [key, count] : stacks.counts)
      bytes_held_ -= std::get<0>(key).size() + kEntryOverheadBytes;
  }
  taken_before_ms_ = std::max(taken_before_ms_, oldest->first + options_.window_ms);
  windows_.erase(oldest);
  ++stats_.windows_discarded;
}

void StackAggregator::AppendWindow(int64_t start_ms, Window& window,
                                   std::vector<wire::StackRecord>& out) {
  const int64_t end_ms = start_ms + options_.window_ms;
  for (auto& [job, stacks] : window) {
    bytes_held_ -= job.first.size() + job.second.size() + kEntryOverheadBytes;
    for (const auto& [key, count] : stacks.counts) {
      bytes_held_ -= std::get<0>(key).size() + kEntryOverheadBytes;
      out.push_back({.job_id = job.first,
                     .host = job.second,
                     .window_start_ms = start_ms,
                     .window_end_ms = end_ms,
                     .folded = std::get<0>(key),
                     .thread_state = std::string(ThreadStateName(std::get<1>(key))),
                     .count = static_cast<int64_t>(count),
                     .gpu_idle = std::get<2>(key)});
    }
  }
  taken_before_ms_ = std::max(taken_before_ms_, end_ms);
}

std::vector<wire::StackRecord> StackAggregator::TakeClosed(int64_t now_ms) {
  std::vector<wire::StackRecord> out;
  while (!windows_.empty() && windows_.begin()->first + options_.window_ms <= now_ms) {
    AppendWindow(windows_.begin()->first, windows_.begin()->second, out);
    windows_.erase(windows_.begin());
  }
  return out;
}

std::vector<wire::StackRecord> StackAggregator::TakeAll() {
  std::vector<wire::StackRecord> out;
  for (auto& [start, window] : windows_)
    AppendWindow(start, window, out);
  windows_.clear();
  return out;
}

}  // namespace expanse::pystack
