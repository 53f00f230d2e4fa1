// The Phase B trigger: a file <control>/phase-b/<job id> that the node's sampler writes when a
// GPU of that job goes idle or slows down (and EXPANSE_PROFILING_ENABLE is on), and that every
// capture agent of the job checks once a second. A trigger with an id the agent has not seen and
// a deadline in the future starts one trace window. The control directory is the daemon
// account's and only readable to jobs, so a job cannot trigger another job's capture.
// docs/formats/trace-segment.md describes the file.
#ifndef EXPANSE_CAPTURE_CAPTURE_TRIGGER_H_
#define EXPANSE_CAPTURE_CAPTURE_TRIGGER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expanse::capture {

inline constexpr size_t kMaxTriggerBytes = 4096;
inline constexpr char kTriggerDirName[] = "phase-b";

struct CaptureTrigger {
  std::string id;                 // unique per trigger, so one file starts one window per process
  uint64_t until_ms = 0;          // Unix ms: a window that would run past it is cut there
  std::string reason;             // "gpu_idle", "throughput_drop", …
  std::vector<std::string> gpus;  // the GPUs (UUIDs) that triggered
};

// Parses a trigger file's text; nullopt with `error` set when it is not one.
std::optional<CaptureTrigger> ParseTrigger(std::string_view text, std::string* error);
std::string TriggerJson(const CaptureTrigger& trigger);

// Reads <control>/phase-b/<job id>: nullopt without an error when there is none.
std::optional<CaptureTrigger> ReadTrigger(const std::string& control_dir, const std::string& job_id,
                                          std::string* error);

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_CAPTURE_TRIGGER_H_
