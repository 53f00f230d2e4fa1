// A Phase B trigger file as the capture agent reads it inside every CUDA job process
// (capture/capture_trigger.h): written by the node's sampler into the control directory, but
// read in a job the agent must never disturb. Properties: never a crash or an exception
// (ParseTrigger has no way to report one, and the job would die of it); a trigger it accepts
// keeps its bounds (an id of 1-128 bytes, a reason of at most 64, at most 64 GPUs of at most
// 64 bytes each); what TriggerJson writes of it parses back to the same trigger.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "capture/capture_trigger.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > expanse::capture::kMaxTriggerBytes)
    return 0;  // ReadTrigger refuses a larger file before parsing it
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  const std::optional<expanse::capture::CaptureTrigger> t =
      expanse::capture::ParseTrigger(text, &error);
  if (!t) {
    Require(!error.empty());
    return 0;
  }
  Require(!t->id.empty() && t->id.size() <= 128);
  Require(t->reason.size() <= 64);
  Require(t->gpus.size() <= 64);
  for (const std::string& gpu : t->gpus)
    Require(gpu.size() <= 64);
  std::string again_error;
  const std::optional<expanse::capture::CaptureTrigger> again =
      expanse::capture::ParseTrigger(expanse::capture::TriggerJson(*t), &again_error);
  Require(again.has_value() && again->id == t->id && again->until_ms == t->until_ms &&
          again->reason == t->reason && again->gpus == t->gpus);
  return 0;
}
