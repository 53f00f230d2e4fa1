#include "dcgm/dmon_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include "core/quote.h"

namespace expanse::dcgm {
namespace {

// Entity kinds dmon prints besides "GPU <id>" (format_as(dcgm_field_entity_group_t) in
// common/EntityListHelpers.cpp; "SW" starts an NvSwitch link row, "UNKNOWN" a global one).
constexpr std::array<std::string_view, 9> kOtherEntities{
    "GPU-I", "GPU-CI", "vGPU", "Switch", "LINK", "CPU", "CX", "SW", "UNKNOWN"};

std::vector<std::string_view> SplitBlanks(std::string_view text) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < text.size()) {
    const size_t begin = text.find_first_not_of(" \t", at);
    if (begin == std::string_view::npos)
      break;
    size_t end = text.find_first_of(" \t", begin);
    if (end == std::string_view::npos)
      end = text.size();
    words.push_back(text.substr(begin, end - begin));
    at = end;
  }
  return words;
}

std::optional<uint32_t> ParseGpuId(std::string_view word) {
  uint32_t id = 0;
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
  if (error != std::errc() || end != word.data() + word.size())
    return std::nullopt;
  return id;
}

enum class Cell { kPresent, kNa, kTruncated, kRefused };

// One cell of a GPU row: "N/A", "123", "0.571", or a value dmon cut to its column ("123...").
Cell ParseCell(const FieldSpec& spec, std::string_view word, double* value) {
  if (word == "N/A")
    return Cell::kNa;
  if (word.ends_with("..."))
    return Cell::kTruncated;
  double raw = 0;
  const auto [end, error] =
      std::from_chars(word.data(), word.data() + word.size(), raw, std::chars_format::fixed);
  if (error != std::errc() || end != word.data() + word.size() || !std::isfinite(raw) || raw < 0 ||
      raw > spec.max_raw)
    return Cell::kRefused;
  *value = raw == 0 ? 0.0 : raw * spec.scale;  // no -0
  return Cell::kPresent;
}

}  // namespace

Result<DmonParser> DmonParser::Create(std::vector<uint16_t> field_ids) {
  if (field_ids.empty() || field_ids.size() > kMaxDmonFields) {
    return InvalidArgumentError("dmon fields: " + std::to_string(field_ids.size()) +
                                " fields asked for; 1 to " + std::to_string(kMaxDmonFields) +
                                " are allowed");
  }
  for (size_t i = 0; i < field_ids.size(); ++i) {
    if (FindField(field_ids[i]) == nullptr)
      return InvalidArgumentError("dmon fields: field " + std::to_string(field_ids[i]) +
                                  " is not one Expanse reads (src/dcgm/dcgm_fields.cc)");
    if (std::find(field_ids.begin(), field_ids.begin() + static_cast<ptrdiff_t>(i), field_ids[i]) !=
        field_ids.begin() + static_cast<ptrdiff_t>(i))
      return InvalidArgumentError("dmon fields: field " + std::to_string(field_ids[i]) +
                                  " is asked for twice");
  }
  return DmonParser(std::move(field_ids));
}

DmonParser::DmonParser(std::vector<uint16_t> field_ids) : field_ids_(std::move(field_ids)) {
  for (const uint16_t id : field_ids_) {
    specs_.push_back(FindField(id));
    field_stats_.push_back(DmonFieldStats{.field_id = id});
    columns_.push_back(columns_.size());
  }
}

DmonEvent DmonParser::Refuse(std::string_view line, std::string_view why) {
  ++counters_.refused;
  return DmonRefused{std::string(why) + ": " + QuoteForMessage(line)};
}

DmonEvent DmonParser::Feed(std::string_view line) {
  ++counters_.lines;
  if (line.size() > kMaxDmonLineBytes) {
    ++counters_.oversized;
    ++counters_.refused;
    return DmonRefused{"dmon line of " + std::to_string(line.size()) + " bytes is longer than " +
                       std::to_string(kMaxDmonLineBytes)};
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.remove_suffix(1);
  const std::vector<std::string_view> words = SplitBlanks(line);
  if (words.empty())
    return DmonSkipped{};

  if (words[0].starts_with('#')) {
    // "#Entity <names>" since 2.4, "# Entity <names>" before.
    size_t first_name = 0;
    if (words[0] == "#Entity")
      first_name = 1;
    else if (words[0] == "#" && words.size() > 1 && words[1] == "Entity")
      first_name = 2;
    else
      return Refuse(line, "dmon header without \"#Entity\"");
    ++counters_.headers;
    CheckHeader(std::vector<std::string_view>(words.begin() + static_cast<ptrdiff_t>(first_name),
                                              words.end()));
    return DmonSkipped{};
  }
  // The units line under the header: units are free text ("#", "MB/s", "W"), so not checked.
  if (words[0] == "ID" || words[0] == "Id")
    return DmonSkipped{};

  if (words[0] == "GPU" && words.size() > 1) {
    if (const std::optional<uint32_t> gpu_id = ParseGpuId(words[1])) {
      if (words.size() > 2 && words[2] == "LINK") {  // "GPU 0 LINK 3": an NVLink entity
        ++counters_.other_entities;
        return DmonSkipped{};
      }
      return ParseRow(line, *gpu_id, std::vector<std::string_view>(words.begin() + 2, words.end()));
    }
  }
  if (std::find(kOtherEntities.begin(), kOtherEntities.end(), words[0]) != kOtherEntities.end()) {
    ++counters_.other_entities;
    return DmonSkipped{};
  }
  if (std::optional<DcgmiError> error = RecognizeDcgmiError(line)) {
    ++counters_.errors;
    return *std::move(error);
  }
  return Refuse(line, "not dmon output");
}

DmonEvent DmonParser::ParseRow(std::string_view line, uint32_t gpu_id,
                               const std::vector<std::string_view>& cells) {
  if (!header_matches_)
    return Refuse(line, "dmon row for GPU " + std::to_string(gpu_id) +
                            " under a header naming other columns than the fields asked for");
  if (cells.size() != field_ids_.size()) {
    // Also a row where dmon left a cell blank: it does that for a field the entity does not
    // have, and none of the catalogue's fields is such a field for a GPU.
    return Refuse(line, "dmon row for GPU " + std::to_string(gpu_id) + " has " +
                            std::to_string(cells.size()) + " values for " +
                            std::to_string(field_ids_.size()) + " fields");
  }
  DmonSample sample{.gpu_id = gpu_id, .values = {}};
  sample.values.reserve(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    DmonValue value{.field_id = field_ids_[i], .value = std::nullopt};
    double parsed = 0;
    switch (ParseCell(*specs_[i], cells[columns_[i]], &parsed)) {
      case Cell::kPresent:
        value.value = parsed;
        ++field_stats_[i].present;
        break;
      case Cell::kNa:
        ++counters_.values_na;
        ++field_stats_[i].na;
        break;
      case Cell::kTruncated:
        ++counters_.values_truncated;
        ++field_stats_[i].refused;
        break;
      case Cell::kRefused:
        ++counters_.values_refused;
        ++field_stats_[i].refused;
        break;
    }
    sample.values.push_back(value);
  }
  ++counters_.samples;
  return sample;
}

void DmonParser::CheckHeader(const std::vector<std::string_view>& names) {
  // A permutation of the fields' short names: each named once, nothing else.
  std::vector<size_t> columns(specs_.size(), names.size());
  bool permutation = names.size() == specs_.size();
  for (size_t i = 0; permutation && i < specs_.size(); ++i) {
    const auto at = std::find(names.begin(), names.end(), specs_[i]->short_name);
    permutation = at != names.end() && std::find(at + 1, names.end(), *at) == names.end();
    if (permutation)
      columns[i] = static_cast<size_t>(at - names.begin());
  }
  header_matches_ = permutation;
  if (!permutation) {
    ++counters_.header_mismatches;
    std::string joined;
    for (const std::string_view name : names) {
      if (joined.size() > 256)
        break;
      joined += (joined.empty() ? "" : " ") + std::string(name);
    }
    other_header_ = joined.empty() ? "(none)" : EscapeForMessage(joined, 200);
    return;
  }
  other_header_.clear();
  if (!std::is_sorted(columns.begin(), columns.end()))
    ++counters_.headers_reordered;
  columns_ = std::move(columns);
}

Result<DmonOutput> ParseDmonOutput(std::string_view text, std::vector<uint16_t> field_ids) {
  EXPANSE_ASSIGN_OR_RETURN(DmonParser parser, DmonParser::Create(std::move(field_ids)));
  DmonOutput output;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    DmonEvent event = parser.Feed(line);
    if (auto* sample = std::get_if<DmonSample>(&event))
      output.samples.push_back(std::move(*sample));
    else if (auto* error = std::get_if<DcgmiError>(&event))
      output.error = std::move(*error);
  }
  output.counters = parser.counters();
  return output;
}

}  // namespace expanse::dcgm
