// ActivityWindow: the always-on half of the capture agent. It folds every activity of one
// window (10 s by default) into totals small enough to write every window for every process of a
// job: the top kernels by GPU time, copies by direction, memsets, time spent in each kind of
// synchronisation, and NVTX range totals. Memory is bounded whatever the job does: past
// kMaxDistinctNames kernel (or NVTX) names in one window, further names are counted under
// "(other)".
#ifndef EXPANSE_CAPTURE_ACTIVITY_WINDOW_H_
#define EXPANSE_CAPTURE_ACTIVITY_WINDOW_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "capture/activity.h"

namespace expanse::capture {

inline constexpr size_t kTopKernels = 20;
inline constexpr size_t kTopNvtxRanges = 20;
inline constexpr size_t kMaxDistinctNames = 4096;
inline constexpr size_t kMaxNameBytes = 512;
inline constexpr char kOtherName[] = "(other)";
// The longest window an aggregate reports (the wire's bound, wire/capture_records.h).
inline constexpr uint64_t kMaxWindowMs = 3'600'000;

struct NamedTotal {
  std::string name;
  uint64_t count = 0;
  uint64_t ns = 0;  // GPU time for kernels, wall time for synchronisation and NVTX ranges
};

struct ByteTotal {
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t ns = 0;
};

struct WindowSummary {
  uint64_t start_ms = 0;
  uint64_t end_ms = 0;
  uint64_t kernel_count = 0;
  uint64_t kernel_ns = 0;
  // Sorted by ns, longest first; at most kTopKernels, the rest summed into `other_kernels`.
  std::vector<NamedTotal> top_kernels;
  NamedTotal other_kernels{kOtherName};
  std::map<std::string, ByteTotal> memcpy;  // by direction
  ByteTotal memset;
  std::map<std::string, NamedTotal> sync;  // by type; NamedTotal::name repeats the type
  std::vector<NamedTotal> nvtx_ranges;     // sorted by ns; at most kTopNvtxRanges
  uint64_t nvtx_marks = 0;
  std::set<uint32_t> devices;  // device ordinals with any activity
  uint64_t dropped_records = 0;
  // How much of the window CUPTI was recording (RecordBudget). When less than all of it, every
  // count, byte and duration above is what was seen scaled to the whole window: an estimate.
  uint64_t observed_ms = 0;
};

// Names looked up by string_view without building a string per record (the agent's hot path).
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
};
using NamedTotals = std::unordered_map<std::string, NamedTotal, NameHash, std::equal_to<>>;

class ActivityWindow {
 public:
  explicit ActivityWindow(uint64_t start_ms) : start_ms_(start_ms) {}

  void Add(const Activity& activity);
  void AddDropped(uint64_t records) { dropped_ += records; }
  // CUPTI was off for `ms` of this window (the agent records in bursts within its budget).
  void AddUnobserved(uint64_t ms) { unobserved_ms_ += ms; }
  bool empty() const { return activities_ == 0 && dropped_ == 0; }
  uint64_t start_ms() const { return start_ms_; }

  // The window's totals up to `end_ms`; the window then starts again, empty, at `end_ms`.
  WindowSummary Close(uint64_t end_ms);

 private:
  static void AddNamed(NamedTotals& totals, std::string_view name, uint64_t ns);

  uint64_t start_ms_;
  uint64_t activities_ = 0;
  uint64_t dropped_ = 0;
  uint64_t unobserved_ms_ = 0;
  uint64_t kernel_count_ = 0;
  uint64_t kernel_ns_ = 0;
  NamedTotals kernels_;
  std::map<std::string, ByteTotal> memcpy_;
  ByteTotal memset_;
  NamedTotals sync_;
  NamedTotals nvtx_;
  uint64_t nvtx_marks_ = 0;
  std::set<uint32_t> devices_;
};

// A name cut to kMaxNameBytes on a UTF-8 character boundary (kernel names of deep templates
// run to kilobytes).
std::string BoundedName(std::string_view name);
// For a name over kMaxNameBytes, its first bytes up to where BoundedName would cut it, or ""
// where that cannot be told without cleaning the name: equal to BoundedName(name) whenever
// those bytes are clean text. What a long name is looked up by before it is cleaned.
std::string_view LongNameKey(std::string_view name);

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_ACTIVITY_WINDOW_H_
