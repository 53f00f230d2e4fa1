#include "spool/spool_names.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "spool/spool_format.h"

namespace expanse::spool {
namespace {

constexpr size_t kSequenceDigits = 20;  // digits of UINT64_MAX
// Keeps "<host>-<name>-<reason>" under NAME_MAX (255) with room to spare.
constexpr size_t kMaxQuarantineNameBytes = 200;

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSafeNameByte(char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; }

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

bool IsValidHostName(std::string_view host) {
  if (host.empty() || host.size() > kMaxHostBytes || !IsAlnum(host.front()))
    return false;
  for (const char c : host) {
    if (!IsSafeNameByte(c))
      return false;
  }
  return true;
}

bool IsValidBootId(std::string_view boot_id) {
  if (boot_id.empty() || boot_id.size() > kMaxBootIdBytes)
    return false;
  for (const char c : boot_id) {
    if (!IsAlnum(c) && c != '-')
      return false;
  }
  return true;
}

bool IsValidKind(std::string_view kind) {
  if (kind.empty() || kind.size() > kMaxKindBytes)
    return false;
  for (const char c : kind) {
    if (!((c >= 'a' && c <= 'z') || IsDigit(c) || c == '_'))
      return false;
  }
  return true;
}

std::string SpoolFileName(uint64_t sequence, std::string_view boot_id) {
  char digits[kSequenceDigits + 1];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(sequence));
  std::string name(digits, kSequenceDigits);
  name += '-';
  name += boot_id;
  name += kSpoolFileSuffix;
  return name;
}

std::optional<SpoolFileNameParts> ParseSpoolFileName(std::string_view name) {
  const std::string_view suffix = kSpoolFileSuffix;
  if (!EndsWith(name, suffix) || name.size() < kSequenceDigits + 1 + suffix.size())
    return std::nullopt;
  if (name[kSequenceDigits] != '-')
    return std::nullopt;
  SpoolFileNameParts parts;
  for (size_t i = 0; i < kSequenceDigits; ++i) {
    if (!IsDigit(name[i]))
      return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(name[i] - '0');
    if (parts.sequence > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    parts.sequence = parts.sequence * 10 + digit;
  }
  const std::string_view boot_id =
      name.substr(kSequenceDigits + 1, name.size() - kSequenceDigits - 1 - suffix.size());
  if (!IsValidBootId(boot_id))
    return std::nullopt;
  parts.boot_id = std::string(boot_id);
  return parts;
}

std::string TempFileName(std::string_view final_name) {
  // Unique within the process; the pid separates processes. One writer owns a host
  // directory, so this only has to avoid colliding with its own leftovers.
  static std::atomic<uint64_t> counter{0};
  std::string name = kTempPrefix;
  name += std::to_string(::getpid());
  name += '-';
  name += std::to_string(counter.fetch_add(1));
  name += '-';
  name += final_name;
  return name;
}

bool IsTempFileName(std::string_view name) { return name.starts_with(kTempPrefix); }

EntryKind ClassifyHostEntry(std::string_view name) {
  if (IsTempFileName(name))
    return EntryKind::kTempFile;
  if (name == kHealthFileName)
    return EntryKind::kHealthFile;
  if (ParseSpoolFileName(name).has_value())
    return EntryKind::kSpoolFile;
  return EntryKind::kUnexpected;
}

std::string QuarantineEntryName(std::string_view host, std::string_view name,
                                std::string_view reason) {
  std::string out;
  const auto append = [&out](std::string_view part, size_t max_bytes) {
    for (const char c : part.substr(0, max_bytes))
      out += IsSafeNameByte(c) ? c : '_';
  };
  append(host, kMaxHostBytes);
  out += '-';
  // Reason is ours and short; the hostile name gets what is left.
  const size_t name_budget = kMaxQuarantineNameBytes - out.size() - 1 - reason.size();
  append(name, name_budget);
  out += '-';
  append(reason, reason.size());
  // A name such as ".." from a hostile entry could otherwise start the result with a dot.
  if (out.front() == '.')
    out.front() = '_';
  return out;
}

}  // namespace expanse::spool
