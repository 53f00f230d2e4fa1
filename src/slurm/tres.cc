#include "slurm/tres.h"

#include <charconv>
#include <cmath>
#include <vector>

namespace expanse::slurm::tres {
namespace {

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos)
      end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// A whole decimal count, no sign, no suffix.
std::optional<int64_t> ParseCount(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end || value < 0)
    return std::nullopt;
  return value;
}

// "1000M", "1.50G", "512" (MiB) -> MiB, rounded up. SLURM prints memory in its TRES strings with
// a binary unit suffix (src/common/slurmdb_defs.c, slurmdb_make_tres_string_from_simple).
std::optional<int64_t> ParseMemoryMib(std::string_view text) {
  if (text.empty())
    return std::nullopt;
  double scale = 1;  // to MiB
  switch (text.back()) {
    case 'K':
      scale = 1.0 / 1024;
      break;
    case 'M':
      break;
    case 'G':
      scale = 1024;
      break;
    case 'T':
      scale = 1024.0 * 1024;
      break;
    case 'P':
      scale = 1024.0 * 1024 * 1024;
      break;
    default:
      scale = 0;  // no suffix
  }
  if (scale != 0)
    text.remove_suffix(1);
  else
    scale = 1;
  if (text.empty() || text.front() == '-' || text.front() == '+')
    return std::nullopt;
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end)
    return std::nullopt;
  const double mib = std::ceil(value * scale);
  // 2^62 MiB is far beyond any machine and keeps later sums well inside int64.
  if (!std::isfinite(mib) || mib < 0 || mib > 4.6e18)
    return std::nullopt;
  return static_cast<int64_t>(mib);
}

}  // namespace

std::map<std::string, int64_t> ParseTresCounts(std::string_view text) {
  std::map<std::string, int64_t> counts;
  if (text.empty())
    return counts;
  for (std::string_view item : Split(text, ',')) {
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0)
      continue;
    const std::string_view name = item.substr(0, equals);
    const std::string_view value = item.substr(equals + 1);
    const std::optional<int64_t> count = name == "mem" ? ParseMemoryMib(value) : ParseCount(value);
    if (count.has_value())
      counts[std::string(name)] = *count;
  }
  return counts;
}

std::optional<int64_t> GpusInTresCounts(const std::map<std::string, int64_t>& counts) {
  if (const auto it = counts.find("gres/gpu"); it != counts.end())
    return it->second;
  std::optional<int64_t> typed;
  for (auto it = counts.lower_bound("gres/gpu:"); it != counts.end(); ++it) {
    if (!it->first.starts_with("gres/gpu:"))
      break;
    int64_t sum = 0;
    if (__builtin_add_overflow(typed.value_or(0), it->second, &sum))
      return std::nullopt;
    typed = sum;
  }
  return typed;
}

std::optional<int64_t> GpusInTresPer(std::string_view text) {
  std::optional<int64_t> total;
  if (text.empty())
    return total;
  for (std::string_view item : Split(text, ',')) {
    // "gres:gpu:2" (22.05, 23.02) or "gres/gpu:2" (later); a bare "gpu:2" from older releases.
    if (item.starts_with("gres:") || item.starts_with("gres/"))
      item.remove_prefix(5);
    const std::vector<std::string_view> fields = Split(item, ':');
    if (fields.front() != "gpu")
      continue;
    // gpu, gpu:N, gpu:type, gpu:type:N.
    int64_t count = 1;
    if (fields.size() > 1) {
      const std::optional<int64_t> last = ParseCount(fields.back());
      if (last.has_value())
        count = *last;
      else if (fields.size() > 2)
        continue;  // gpu:type:garbage
    }
    if (fields.size() > 3)
      continue;
    int64_t sum = 0;
    if (__builtin_add_overflow(total.value_or(0), count, &sum))
      return std::nullopt;
    total = sum;
  }
  return total;
}

}  // namespace expanse::slurm::tres
