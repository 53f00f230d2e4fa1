#include "pystack/proc_maps.h"

#include <cctype>
#include <charconv>

#include "core/quote.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::string_view kMapsDeletedSuffix = " (deleted)";

// Splits off the text up to the next space and the spaces after it.
std::string_view NextField(std::string_view& rest) {
  const std::size_t end = std::min(rest.find(' '), rest.size());
  const std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  while (!rest.empty() && rest.front() == ' ') {
    rest.remove_prefix(1);
  }
  return field;
}

bool ParseNumber(std::string_view text, int base, std::uint64_t& out) {
  if (text.empty()) {
    return false;
  }
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return error == std::errc() && end == text.data() + text.size();
}

Status MalformedMaps(std::size_t line_number, std::string_view line, std::string_view what) {
  return InvalidArgumentError(
             Format("/proc maps line {}: {} in {}", line_number, what, QuoteForMessage(line, 120)))
      .WithReason("proc_maps_malformed");
}

Result<MemoryMapping> ParseMapsLine(std::string_view line, std::size_t line_number) {
  std::string_view rest = line;
  const std::string_view range = NextField(rest);
  const std::string_view permissions = NextField(rest);
  const std::string_view offset = NextField(rest);
  const std::string_view device = NextField(rest);
  const std::string_view inode = NextField(rest);
  MemoryMapping mapping;
  const std::size_t dash = range.find('-');
  if (dash == std::string_view::npos || !ParseNumber(range.substr(0, dash), 16, mapping.start) ||
      !ParseNumber(range.substr(dash + 1), 16, mapping.end) || mapping.end < mapping.start) {
    return MalformedMaps(line_number, line, "bad address range");
  }
  if (permissions.size() != 4) {
    return MalformedMaps(line_number, line, "bad permissions");
  }
  if (!ParseNumber(offset, 16, mapping.file_offset)) {
    return MalformedMaps(line_number, line, "bad file offset");
  }
  const std::size_t colon = device.find(':');
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  if (colon == std::string_view::npos || !ParseNumber(device.substr(0, colon), 16, major) ||
      !ParseNumber(device.substr(colon + 1), 16, minor) || major > UINT32_MAX ||
      minor > UINT32_MAX) {
    return MalformedMaps(line_number, line, "bad device");
  }
  mapping.device_major = static_cast<std::uint32_t>(major);
  mapping.device_minor = static_cast<std::uint32_t>(minor);
  if (!ParseNumber(inode, 10, mapping.inode)) {
    return MalformedMaps(line_number, line, "bad inode");
  }
  mapping.permissions = std::string(permissions);
  if (rest.ends_with(kMapsDeletedSuffix)) {
    rest.remove_suffix(kMapsDeletedSuffix.size());
    mapping.deleted = true;
  }
  mapping.path = std::string(rest);
  return mapping;
}

}  // namespace

Result<std::vector<MemoryMapping>> ParseProcMaps(std::string_view text, std::size_t max_mappings) {
  std::vector<MemoryMapping> mappings;
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    ++line_number;
    if (line.empty()) {
      continue;
    }
    if (mappings.size() >= max_mappings) {
      return ResourceExhaustedError(Format("/proc maps has more than {} mappings", max_mappings))
          .WithReason("proc_maps_too_large");
    }
    EXPANSE_ASSIGN_OR_RETURN(MemoryMapping mapping, ParseMapsLine(line, line_number));
    mappings.push_back(std::move(mapping));
  }
  return mappings;
}

Result<ProcStat> ParseProcStat(std::string_view text) {
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos || text.find('(') > close) {
    return InvalidArgumentError("/proc stat: no command name in parentheses")
        .WithReason("proc_stat_malformed");
  }
  std::string_view rest = text.substr(close + 1);
  while (!rest.empty() && rest.front() == ' ') {
    rest.remove_prefix(1);
  }
  // Fields from 3 (state) on; start time is field 22.
  ProcStat stat;
  constexpr int kStateField = 3;
  constexpr int kStartTimeField = 22;
  for (int field = kStateField; field <= kStartTimeField; ++field) {
    std::string_view value = NextField(rest);
    if (value.ends_with('\n')) {
      value.remove_suffix(1);
    }
    if (value.empty()) {
      return InvalidArgumentError(Format("/proc stat: field {} missing", field))
          .WithReason("proc_stat_malformed");
    }
    if (field == kStateField) {
      // The kernel's states are letters (R, S, D, Z, T, t, X, I, ...).
      if (value.size() != 1 || !std::isalpha(static_cast<unsigned char>(value.front()))) {
        return InvalidArgumentError("/proc stat: bad state " + QuoteForMessage(value))
            .WithReason("proc_stat_malformed");
      }
      stat.state = value.front();
    } else if (field == kStartTimeField && !ParseNumber(value, 10, stat.start_time)) {
      return InvalidArgumentError("/proc stat: bad start time " + QuoteForMessage(value))
          .WithReason("proc_stat_malformed");
    }
  }
  return stat;
}

}  // namespace expanse::pystack
