#include "telemetry/proc_thread_files.h"

#include <charconv>

namespace expanse::telemetry {

char ParseThreadState(std::string_view stat) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= stat.size() || stat[paren + 1] != ' ')
    return 0;
  return stat[paren + 2];
}

std::optional<uint64_t> ParseRunQueueWaitNs(std::string_view schedstat) {
  const char* const end = schedstat.data() + schedstat.size();
  uint64_t on_cpu = 0, waiting = 0;
  const auto first = std::from_chars(schedstat.data(), end, on_cpu);
  if (first.ec != std::errc() || first.ptr == end || *first.ptr != ' ')
    return std::nullopt;
  const auto second = std::from_chars(first.ptr + 1, end, waiting);
  if (second.ec != std::errc() || (second.ptr != end && *second.ptr != ' ' && *second.ptr != '\n'))
    return std::nullopt;
  return waiting;
}

}  // namespace expanse::telemetry
