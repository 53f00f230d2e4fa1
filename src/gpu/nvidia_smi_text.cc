#include "gpu/nvidia_smi_text.h"

#include <charconv>
#include <system_error>
#include <utility>

namespace expanse::gpu::nvidia_smi_internal {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

std::string_view Trim(std::string_view text) {
  while (!text.empty() && IsBlank(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back()))
    text.remove_suffix(1);
  return text;
}

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    lines.push_back({++number, Trim(text.substr(0, newline))});
    if (newline == std::string_view::npos)
      break;
    text.remove_prefix(newline + 1);
  }
  return lines;
}

std::vector<std::string_view> SplitWhitespace(std::string_view text) {
  std::vector<std::string_view> words;
  size_t start = 0;
  while (start < text.size()) {
    while (start < text.size() && IsBlank(text[start]))
      ++start;
    size_t end = start;
    while (end < text.size() && !IsBlank(text[end]))
      ++end;
    if (end > start)
      words.push_back(text.substr(start, end - start));
    start = end;
  }
  return words;
}

bool IsAbsent(std::string_view cell) {
  return cell == "N/A" || (cell.size() >= 2 && cell.front() == '[' && cell.back() == ']');
}

std::optional<uint64_t> ParseUint(std::string_view digits, int base) {
  uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, error] = std::from_chars(digits.data(), end, value, base);
  if (digits.empty() || error != std::errc() || ptr != end)
    return std::nullopt;
  return value;
}

Status OutputError(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("nvidia_smi_output");
}

}  // namespace expanse::gpu::nvidia_smi_internal
