#include "core/version_compare.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expanse {
namespace {

constexpr size_t kMaxVersionChars = 64;
constexpr size_t kMaxNumberDigits = 9;
constexpr size_t kMaxNumbers = 4;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentifierChar(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos)
      return parts;
    start = end + 1;
  }
}

uint64_t NumberOf(std::string_view digits) {
  uint64_t value = 0;
  for (char c : digits)
    value = value * 10 + static_cast<uint64_t>(c - '0');
  return value;
}

// The numbers of a dotted version, or nullopt when the text is not min..kMaxNumbers numbers.
std::optional<std::vector<uint64_t>> ParseNumbers(std::string_view text, size_t min_numbers) {
  std::vector<std::string_view> parts = Split(text, '.');
  if (parts.size() < min_numbers || parts.size() > kMaxNumbers)
    return std::nullopt;
  std::vector<uint64_t> numbers;
  for (std::string_view part : parts) {
    if (part.empty() || part.size() > kMaxNumberDigits ||
        !std::all_of(part.begin(), part.end(), IsDigit))
      return std::nullopt;
    numbers.push_back(NumberOf(part));
  }
  return numbers;
}

struct ParsedVersion {
  std::vector<uint64_t> numbers;
  std::optional<std::vector<std::string_view>> prerelease;
};

std::optional<ParsedVersion> Parse(std::string_view text) {
  if (text.empty() || text.size() > kMaxVersionChars)
    return std::nullopt;
  size_t dash = text.find('-');
  auto numbers = ParseNumbers(text.substr(0, dash), 1);
  if (!numbers)
    return std::nullopt;
  ParsedVersion parsed{*numbers, std::nullopt};
  if (dash != std::string_view::npos) {
    std::vector<std::string_view> identifiers = Split(text.substr(dash + 1), '.');
    for (std::string_view id : identifiers) {
      if (id.empty() || !std::all_of(id.begin(), id.end(), IsIdentifierChar))
        return std::nullopt;
    }
    parsed.prerelease = identifiers;
  }
  return parsed;
}

int CompareNumbers(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    uint64_t x = i < a.size() ? a[i] : 0;
    uint64_t y = i < b.size() ? b[i] : 0;
    if (x != y)
      return x < y ? -1 : 1;
  }
  return 0;
}

int CompareIdentifiers(std::string_view a, std::string_view b) {
  bool a_numeric = std::all_of(a.begin(), a.end(), IsDigit);
  bool b_numeric = std::all_of(b.begin(), b.end(), IsDigit);
  if (a_numeric && b_numeric) {
    // Compare by value without overflow: strip leading zeros, then length, then digits.
    a.remove_prefix(std::min(a.find_first_not_of('0'), a.size()));
    b.remove_prefix(std::min(b.find_first_not_of('0'), b.size()));
    if (a.size() != b.size())
      return a.size() < b.size() ? -1 : 1;
  } else if (a_numeric != b_numeric) {
    return a_numeric ? -1 : 1;
  }
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

int ComparePrereleases(const std::vector<std::string_view>& a,
                       const std::vector<std::string_view>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (int c = CompareIdentifiers(a[i], b[i]); c != 0)
      return c;
  }
  if (a.size() != b.size())
    return a.size() < b.size() ? -1 : 1;
  return 0;
}

int CompareBytes(std::string_view a, std::string_view b) {
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

}  // namespace

bool IsValidVersion(std::string_view version) { return Parse(version).has_value(); }

std::optional<std::string> CanonicalVersion(std::string_view text) {
  if (text.size() > 2 * kMaxVersionChars)
    return std::nullopt;
  if (text.starts_with('v'))
    text.remove_prefix(1);
  if (const size_t plus = text.find('+'); plus != std::string_view::npos) {
    const std::string_view build = text.substr(plus + 1);
    size_t start = 0;
    while (true) {
      const size_t dot = build.find('.', start);
      const std::string_view id = build.substr(start, dot - start);
      const bool ok = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '-';
      });
      if (!ok)
        return std::nullopt;
      if (dot == std::string_view::npos)
        break;
      start = dot + 1;
    }
    text = text.substr(0, plus);
  }
  if (!IsValidVersion(text))
    return std::nullopt;
  return std::string(text);
}

int CompareVersions(std::string_view a, std::string_view b) {
  std::optional<ParsedVersion> x = Parse(a);
  std::optional<ParsedVersion> y = Parse(b);
  if (!x || !y) {
    if (x.has_value() != y.has_value())
      return x ? 1 : -1;
    return CompareBytes(a, b);
  }
  if (int c = CompareNumbers(x->numbers, y->numbers); c != 0)
    return c;
  if (x->prerelease.has_value() != y->prerelease.has_value())
    return x->prerelease ? -1 : 1;
  if (x->prerelease)
    return ComparePrereleases(*x->prerelease, *y->prerelease);
  return 0;
}

bool IsValidDriverVersion(std::string_view version) {
  return version.size() <= kMaxVersionChars && ParseNumbers(version, 2).has_value();
}

int CompareDriverVersions(std::string_view a, std::string_view b) {
  auto x = a.size() <= kMaxVersionChars ? ParseNumbers(a, 2) : std::nullopt;
  auto y = b.size() <= kMaxVersionChars ? ParseNumbers(b, 2) : std::nullopt;
  if (!x || !y) {
    if (x.has_value() != y.has_value())
      return x ? 1 : -1;
    return CompareBytes(a, b);
  }
  return CompareNumbers(*x, *y);
}

}  // namespace expanse
