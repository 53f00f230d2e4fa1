// The records expanse-cupti-helper writes to its parent (the sampler) on standard output, one
// JSON object per line (docs/formats/cupti-helper.md), and the commands the parent writes to
// its standard input.
//
// The parent treats every line as hostile input: a record is bounded in size, names only the
// series of its own counter set (never an NVML series under the same key) and a plausible
// device, or it is refused and counted. A value outside its series' range (ratios 0..1.05, kept
// as at most 1; rates not negative) drops only that value, counted apart.
#ifndef EXPANSE_CUPTI_HELPER_RECORDS_H_
#define EXPANSE_CUPTI_HELPER_RECORDS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.h"
#include "cupti/metric_sets.h"

namespace expanse::cupti {

inline constexpr size_t kMaxRecordBytes = 16 * 1024;
inline constexpr unsigned kMaxDevices = 64;

// Per-second means of one GPU's counters.
struct CounterRecord {
  int64_t unix_ms = 0;  // when the means end (the helper read the counters)
  unsigned device = 0;  // CUDA device index inside the helper
  std::string uuid;     // "GPU-…", as NVML names the GPU
  CounterSet set = CounterSet::kLight;
  std::vector<std::pair<std::string, double>> values;  // series name -> value
  uint32_t samples = 0;                                // PM samples behind the means
};

// A GPU's PM sampling state changed, or the helper starts (one per device).
struct StatusRecord {
  std::optional<unsigned> device;  // unset: a GPU the sampler named that CUDA does not list
  std::string uuid;
  std::string pm_sampling;          // "ok", "unavailable", "yielded"
  std::string reason;               // CUPTI error name or a stable code; "" when ok
  std::string fix;                  // what an operator does about it; "" when nothing
  std::vector<std::string> series;  // series sampled now (ok only)
};

// Written every reporting period even with nothing to say, so the parent can tell a helper
// stuck in a driver call from a quiet one.
struct AliveRecord {
  int64_t unix_ms = 0;
};

// The helper's last word before it exits with nothing sampled: "hung_call in cuInit",
// "CUDA_ERROR_NO_DEVICE in cuInit", "libcuda_not_found: …".
struct FatalRecord {
  std::string reason;
};

using HelperRecord = std::variant<CounterRecord, StatusRecord, AliveRecord, FatalRecord>;

// One line without its newline.
std::string RenderRecord(const HelperRecord& record);
// A counters value beyond its series' range (a ratio over 1.05, a negative rate) is left out of
// the record rather than refusing it, so that the GPU's other series are kept; when `dropped`
// is given, such values are put there (series name, value; cleared first), for the parent to
// count (CounterHelper::Stats "dropped_values").
Result<HelperRecord> ParseRecord(std::string_view line,
                                 std::vector<std::pair<std::string, double>>* dropped = nullptr);

// Parent -> helper: "escalate <uuid> <seconds>" switches that GPU to the Rich set for the
// window (bounded by kMaxEscalation), "light <uuid>" ends it early; "release <uuid>" lets that
// GPU go (a CUDA tool in a job there may want the counters) until "resume <uuid>".
inline constexpr std::chrono::seconds kMaxEscalation{600};
struct HelperCommand {
  enum class Kind { kEscalate, kLight, kRelease, kResume } kind = Kind::kEscalate;
  std::string uuid;
  std::chrono::seconds window{0};
};
std::string RenderCommand(const HelperCommand& command);
Result<HelperCommand> ParseCommand(std::string_view line);

// A GPU UUID as NVML and CUDA print it: "GPU-" or "MIG-" and hex digits with dashes.
bool IsGpuUuid(std::string_view text);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_HELPER_RECORDS_H_
