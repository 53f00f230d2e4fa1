// ParseTraceSegmentHeader on arbitrary bytes: a trace segment is written by a job's process (as
// the job's user) and read by the sampler, the controller and the server. It must never crash,
// and what it accepts must hold a header within its documented ranges.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wire/trace_segment_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto header = expanse::wire::ParseTraceSegmentHeader(text, "seg", "bad_segment");
  if (!header.ok())
    return 0;
  if (header->job_id.empty() || header->host.empty() || header->pid <= 0 ||
      header->window_end_ms < header->window_start_ms ||
      header->window_end_ms - header->window_start_ms > expanse::wire::kMaxTraceSegmentWindowMs ||
      header->trigger_id.empty())
    std::abort();
  return 0;
}
