#include "gpu/nvidia_smi_pmon.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/quote.h"
#include "gpu/nvidia_smi_text.h"

namespace expanse::gpu {
namespace {

using nvidia_smi_internal::Line;
using nvidia_smi_internal::OutputError;
using nvidia_smi_internal::ParseUint;
using nvidia_smi_internal::SplitLines;
using nvidia_smi_internal::SplitWhitespace;

// Where the columns we read sit among a line's words.
struct PmonColumns {
  size_t gpu = 0;
  size_t pid = 0;
  size_t sm = 0;
  size_t mem = 0;
  size_t needed = 0;  // words a data line must have to reach all four
};

Result<PmonColumns> ReadHeader(const Line& line, const std::vector<std::string_view>& names) {
  auto find = [&](std::string_view name) -> Result<size_t> {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name)
        return i;
    }
    return OutputError("nvidia-smi pmon line " + std::to_string(line.number) +
                       ": the header has no column " + std::string(name));
  };
  PmonColumns columns;
  EXPANSE_ASSIGN_OR_RETURN(columns.gpu, find("gpu"));
  EXPANSE_ASSIGN_OR_RETURN(columns.pid, find("pid"));
  EXPANSE_ASSIGN_OR_RETURN(columns.sm, find("sm"));
  EXPANSE_ASSIGN_OR_RETURN(columns.mem, find("mem"));
  columns.needed = 1 + std::max({columns.gpu, columns.pid, columns.sm, columns.mem});
  return columns;
}

Status WordError(const Line& line, std::string_view column, std::string_view expected,
                 std::string_view word) {
  return OutputError("nvidia-smi pmon line " + std::to_string(line.number) + " column " +
                     std::string(column) + ": expected " + std::string(expected) + ", got " +
                     QuoteForMessage(word));
}

Result<uint32_t> Index(const Line& line, std::string_view column, std::string_view word) {
  const std::optional<uint64_t> value = ParseUint(word);
  if (!value.has_value() || *value > std::numeric_limits<uint32_t>::max())
    return WordError(line, column, "a whole number", word);
  return static_cast<uint32_t>(*value);
}

Result<std::optional<uint32_t>> Percent(const Line& line, std::string_view column,
                                        std::string_view word) {
  if (word == "-")
    return std::optional<uint32_t>();
  const std::optional<uint64_t> value = ParseUint(word);
  // Not capped at 100: a driver's rounding may overshoot, and one odd sample must not cost
  // the whole reading.
  if (!value.has_value() || *value > std::numeric_limits<uint32_t>::max())
    return WordError(line, column, "a percentage or \"-\"", word);
  return std::optional<uint32_t>(static_cast<uint32_t>(*value));
}

}  // namespace

Result<std::vector<PmonRow>> ParsePmon(std::string_view text) {
  std::vector<PmonRow> rows;
  std::optional<PmonColumns> columns;
  for (const Line& line : SplitLines(text)) {
    if (line.text.empty())
      continue;
    if (line.text.front() == '#') {
      const std::vector<std::string_view> names = SplitWhitespace(line.text.substr(1));
      if (!columns.has_value() && std::find(names.begin(), names.end(), "pid") != names.end()) {
        EXPANSE_ASSIGN_OR_RETURN(columns, ReadHeader(line, names));
      }
      continue;
    }
    if (!columns.has_value()) {
      return OutputError("nvidia-smi pmon line " + std::to_string(line.number) +
                         ": expected the \"# gpu pid ...\" header first, got " +
                         QuoteForMessage(line.text));
    }
    const std::vector<std::string_view> words = SplitWhitespace(line.text);
    if (words.size() < columns->needed) {
      return OutputError("nvidia-smi pmon line " + std::to_string(line.number) + ": expected " +
                         std::to_string(columns->needed) + " or more columns, got " +
                         std::to_string(words.size()));
    }
    if (words[columns->pid] == "-")
      continue;
    PmonRow row;
    EXPANSE_ASSIGN_OR_RETURN(row.gpu_index, Index(line, "gpu", words[columns->gpu]));
    EXPANSE_ASSIGN_OR_RETURN(row.pid, Index(line, "pid", words[columns->pid]));
    EXPANSE_ASSIGN_OR_RETURN(row.sm_util, Percent(line, "sm", words[columns->sm]));
    EXPANSE_ASSIGN_OR_RETURN(row.mem_util, Percent(line, "mem", words[columns->mem]));
    rows.push_back(row);
  }
  return rows;
}

}  // namespace expanse::gpu
