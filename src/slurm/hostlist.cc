#include "slurm/hostlist.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <variant>

#include "core/quote.h"

namespace expanse::slurm {
namespace {

struct Range {
  uint32_t low = 0;
  uint32_t high = 0;
  size_t width = 0;  // digits of the low bound as written: the zero-padding width
};
using RangeGroup = std::vector<Range>;
using Segment = std::variant<std::string_view, RangeGroup>;  // literal text or "[...]"
using Pattern = std::vector<Segment>;

// SLURM's own bound on range bounds; keeps a range's numbers within 9 digits.
constexpr uint32_t kMaxBound = 999'999'999;

// A decimal number of 1 to 10 ASCII digits (no sign, no blanks) that fits in 32 bits. The
// 10-digit limit keeps Matches() (which tries runs of up to 10 digits) in step with expansion.
std::optional<uint32_t> ParseDecimalU32(std::string_view text) {
  if (text.empty() || text.size() > 10 || text.front() < '0' || text.front() > '9') {
    return std::nullopt;
  }
  uint32_t value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) {
    return std::nullopt;
  }
  return value;
}

Status Malformed(std::string_view expression, std::string_view why) {
  return InvalidArgumentError("hostlist " + QuoteForMessage(expression) + ": " + std::string(why))
      .WithReason("hostlist_malformed");
}

// "01-04,07" (the inside of the brackets).
Result<RangeGroup> ParseRangeGroup(std::string_view expression, std::string_view inside) {
  RangeGroup group;
  for (size_t start = 0; start <= inside.size();) {
    size_t end = inside.find(',', start);
    if (end == std::string_view::npos) {
      end = inside.size();
    }
    const std::string_view item = inside.substr(start, end - start);
    start = end + 1;
    const size_t dash = item.find('-');
    const std::string_view low_text = item.substr(0, dash);
    const std::string_view high_text =
        dash == std::string_view::npos ? low_text : item.substr(dash + 1);
    const std::optional<uint32_t> low = ParseDecimalU32(low_text);
    const std::optional<uint32_t> high = ParseDecimalU32(high_text);
    if (!low || !high || *high > kMaxBound) {
      return Malformed(expression, "range " + QuoteForMessage(item) + " is not N or N-M");
    }
    if (*low > *high) {
      return Malformed(expression, "range " + QuoteForMessage(item) + " runs backwards");
    }
    group.push_back(Range{*low, *high, low_text.size()});
  }
  return group;
}

Result<Pattern> ParseName(std::string_view expression, std::string_view name) {
  if (name.empty()) {
    return Malformed(expression, "empty name");
  }
  Pattern pattern;
  size_t pos = 0;
  while (pos < name.size()) {
    const size_t open = name.find('[', pos);
    const size_t stray_close = name.substr(0, open).find(']', pos);
    if (stray_close != std::string_view::npos) {
      return Malformed(expression, "']' without '['");
    }
    if (open == std::string_view::npos) {
      pattern.emplace_back(name.substr(pos));
      break;
    }
    if (open > pos) {
      pattern.emplace_back(name.substr(pos, open - pos));
    }
    const size_t close = name.find(']', open);
    if (close == std::string_view::npos) {
      return Malformed(expression, "'[' without ']'");
    }
    const std::string_view inside = name.substr(open + 1, close - open - 1);
    if (inside.find('[') != std::string_view::npos) {
      return Malformed(expression, "nested '['");
    }
    Result<RangeGroup> group = ParseRangeGroup(expression, inside);
    if (!group.ok()) {
      return std::move(group).status();
    }
    pattern.emplace_back(std::move(*group));
    pos = close + 1;
  }
  return pattern;
}

// Splits at commas outside brackets.
Result<std::vector<Pattern>> ParseExpression(std::string_view expression) {
  std::vector<Pattern> patterns;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= expression.size(); ++i) {
    const char c = i < expression.size() ? expression[i] : ',';
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      --depth;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\0') {
      return Malformed(expression, "blank or NUL inside the expression");
    }
    // The end of the text closes the last name even inside an open bracket, which ParseName then
    // reports.
    if ((c == ',' && depth <= 0) || i == expression.size()) {
      Result<Pattern> pattern = ParseName(expression, expression.substr(start, i - start));
      if (!pattern.ok()) {
        return std::move(pattern).status();
      }
      patterns.push_back(std::move(*pattern));
      start = i + 1;
      depth = 0;
    }
  }
  return patterns;
}

std::string Padded(uint32_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) {
    digits.insert(0, width - digits.size(), '0');
  }
  return digits;
}

size_t DecimalDigits(uint32_t value) {
  size_t digits = 1;
  while (value >= 10) {
    value /= 10;
    ++digits;
  }
  return digits;
}

// Appends every expansion of pattern[segment...] with `prefix` in front; false past the cap.
bool Expand(const Pattern& pattern, size_t segment, const std::string& prefix, size_t max_names,
            std::vector<std::string>& names) {
  if (segment == pattern.size()) {
    if (names.size() >= max_names) {
      return false;
    }
    names.push_back(prefix);
    return true;
  }
  if (const auto* literal = std::get_if<std::string_view>(&pattern[segment])) {
    return Expand(pattern, segment + 1, prefix + std::string(*literal), max_names, names);
  }
  for (const Range& range : std::get<RangeGroup>(pattern[segment])) {
    for (uint64_t value = range.low; value <= range.high; ++value) {
      if (!Expand(pattern, segment + 1, prefix + Padded(static_cast<uint32_t>(value), range.width),
                  max_names, names)) {
        return false;
      }
    }
  }
  return true;
}

// Matches name[pos...] against pattern[segment...]. `memo` holds one entry per (segment, pos):
// 0 unknown, 1 no, 2 yes; it keeps adjacent range groups ("[1-9][1-9]...") from backtracking
// exponentially.
bool Matches(const Pattern& pattern, size_t segment, std::string_view name, size_t pos,
             std::vector<uint8_t>& memo) {
  if (segment == pattern.size()) {
    return pos == name.size();
  }
  uint8_t& known = memo[segment * (name.size() + 1) + pos];
  if (known != 0) {
    return known == 2;
  }
  bool matched = false;
  if (const auto* literal = std::get_if<std::string_view>(&pattern[segment])) {
    matched = name.substr(pos).starts_with(*literal) &&
              Matches(pattern, segment + 1, name, pos + literal->size(), memo);
  } else {
    // Try each run of digits at pos that one of the ranges can print. A range prints v as
    // max(width, digits of v) characters, so that length must be the run's.
    for (size_t length = 1; !matched && length <= 10 && pos + length <= name.size(); ++length) {
      const std::optional<uint32_t> value = ParseDecimalU32(name.substr(pos, length));
      if (!value) {
        break;
      }
      const size_t value_digits = DecimalDigits(*value);
      for (const Range& range : std::get<RangeGroup>(pattern[segment])) {
        if (*value >= range.low && *value <= range.high &&
            length == std::max(range.width, value_digits) &&
            Matches(pattern, segment + 1, name, pos + length, memo)) {
          matched = true;
          break;
        }
      }
    }
  }
  known = matched ? 2 : 1;
  return matched;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostList(std::string_view expression, size_t max_hosts) {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<Pattern> patterns, ParseExpression(expression));
  std::vector<std::string> names;
  for (const Pattern& pattern : patterns) {
    if (!Expand(pattern, 0, "", max_hosts, names)) {
      return ResourceExhaustedError("hostlist " + QuoteForMessage(expression) +
                                    " expands to more than " + std::to_string(max_hosts) + " names")
          .WithReason("hostlist_too_large");
    }
  }
  return names;
}

Result<bool> HostListContains(std::string_view expression, std::string_view name) {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<Pattern> patterns, ParseExpression(expression));
  for (const Pattern& pattern : patterns) {
    std::vector<uint8_t> memo(pattern.size() * (name.size() + 1), 0);
    if (Matches(pattern, 0, name, 0, memo)) {
      return true;
    }
  }
  return false;
}

}  // namespace expanse::slurm
