// `expanse-cupti-helper sample`: PM sampling on the GPUs the sampler hands the helper, one
// record line per GPU per period on standard output, commands from the sampler on standard
// input (docs/formats/cupti-helper.md).
//
// Each GPU runs the Light set, or the Rich set during an escalation window. When a GPU's
// counters are taken by another profiler (or any call fails) the helper releases that GPU at
// once, says so in a status record, and retries after a doubling backoff; the other GPUs carry
// on. The loop ends when standard input closes (the sampler is gone) or on SIGTERM/SIGINT.
#ifndef EXPANSE_CUPTI_CUDA_SAMPLE_LOOP_H_
#define EXPANSE_CUPTI_CUDA_SAMPLE_LOOP_H_

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "cupti/call_watchdog.h"
#include "cupti/cuda/libraries.h"
#include "cupti/cuda/pm_device.h"
#include "cupti/device_plan.h"

namespace expanse::cupti {

struct SampleOptions {
  std::vector<std::string> uuids;  // empty: every GPU CUDA lists
  std::string libcupti;            // CuptiLibrary::Open's argument
  std::chrono::milliseconds period{1000};
  std::optional<std::chrono::milliseconds> duration;  // unset: until input closes
  DevicePlanOptions plan;
  PmOptions pm;
  int input_fd = 0;
  int output_fd = 1;
};

// Returns the process exit status: 0 after a clean end, 1 when nothing could be sampled at
// all (no libcuda, cuInit failed: the reason is in the status line written first).
// libcupti is opened after the driver has listed the GPUs; without it (or when CUPTI cannot
// initialise) every GPU is reported unavailable and the loop still runs, so the sampler sees
// the reason in its records rather than a helper that keeps dying.
int RunSampleLoop(const CudaLibrary& cuda, CallWatchdog& watchdog, const SampleOptions& options,
                  const std::atomic<bool>& stop);

// Writes one record line to `fd` in a single write(); false when the reader has gone.
bool WriteLine(int fd, const std::string& line);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CUDA_SAMPLE_LOOP_H_
