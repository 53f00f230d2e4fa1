// One CUDA activity as the in-process capture agent keeps it: what CUPTI's Activity API reported
// about a kernel, a copy, a memset, a synchronisation or an NVTX range, reduced to the fields the
// aggregates and trace segments use. cuda/record_decode.cc makes these from CUPTI's records;
// everything downstream of it is CUDA-free, so it is built and tested without a toolkit.
#ifndef EXPANSE_CAPTURE_ACTIVITY_H_
#define EXPANSE_CAPTURE_ACTIVITY_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace expanse::capture {

enum class ActivityKind { kKernel, kMemcpy, kMemset, kSync, kNvtxRange, kNvtxMark };

struct Activity {
  ActivityKind kind = ActivityKind::kKernel;
  uint64_t start_ns = 0;  // Unix time in nanoseconds (the agent shifts CUPTI's clock)
  uint64_t end_ns = 0;    // == start_ns for a mark
  uint32_t device = 0;    // CUDA device ordinal in the process
  uint32_t stream = 0;
  // Kernel (mangled) or NVTX name. Only valid during the call it is passed to.
  std::string_view name;
  // Memcpy direction ("htod", "dtoh", "dtod", "htoh", "ptop", "other") or synchronisation type
  // ("device", "stream", "event", "stream_wait_event", "other").
  std::string_view detail;
  uint64_t bytes = 0;  // memcpy and memset
  std::array<int32_t, 3> grid{};
  std::array<int32_t, 3> block{};

  uint64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_ACTIVITY_H_
