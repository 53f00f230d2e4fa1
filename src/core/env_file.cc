#include "core/env_file.h"

#include <algorithm>
#include <utility>

#include "core/env_file_parser.h"
#include "core/utf8.h"

namespace expanse {
namespace {

using env_file_internal::Assignment;
using env_file_internal::QuoteForMessage;

bool IsAsciiLetter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// Characters that mean the same bare as in double quotes, to systemd and to a shell.
bool IsPlainValueChar(char c) {
  if (IsAsciiLetter(c) || IsAsciiDigit(c)) {
    return true;
  }
  static constexpr std::string_view kPlainPunctuation = "_@%+=:,./-";
  return kPlainPunctuation.find(c) != std::string_view::npos;
}

// The VALUE part of a KEY=VALUE line that parses back to exactly `value`.
std::string RenderValue(std::string_view value) {
  if (std::all_of(value.begin(), value.end(), IsPlainValueChar)) {
    return std::string(value);  // includes the empty value: KEY=
  }
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\' || c == '`' || c == '$') {
      out += '\\';
    }
    out += c;
  }
  out += '"';
  return out;
}

std::string RenderLine(const EnvEntry& entry) { return entry.key + "=" + RenderValue(entry.value); }

}  // namespace

bool IsValidEnvKey(std::string_view key) {
  if (key.empty() || !(IsAsciiLetter(key.front()) || key.front() == '_')) {
    return false;
  }
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return IsAsciiLetter(c) || IsAsciiDigit(c) || c == '_'; });
}

Status EnvFile::Set(std::string_view key, std::string_view value) {
  if (!IsValidEnvKey(key)) {
    return InvalidArgumentError("invalid key " + QuoteForMessage(key) +
                                ": keys must match [A-Za-z_][A-Za-z0-9_]*");
  }
  if (value.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("value of " + QuoteForMessage(key) + " contains a NUL byte");
  }
  if (!IsValidUtf8(value)) {
    return InvalidArgumentError("value of " + QuoteForMessage(key) + " is not valid UTF-8");
  }
  const auto [it, inserted] = index_.try_emplace(std::string(key), entries_.size());
  if (inserted) {
    entries_.push_back({std::string(key), std::string(value)});
  } else {
    entries_[it->second].value = std::string(value);
  }
  return OkStatus();
}

std::optional<std::string_view> EnvFile::Get(std::string_view key) const {
  const auto it = index_.find(std::string(key));
  if (it == index_.end()) {
    return std::nullopt;
  }
  return entries_[it->second].value;
}

Result<EnvFile> ParseEnvFile(std::string_view text) {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<Assignment> assignments,
                           env_file_internal::ParseAssignments(text));
  EnvFile file;
  for (const Assignment& assignment : assignments) {
    // The parser already enforced Set()'s preconditions; a failure here is our bug.
    if (Status status = file.Set(assignment.key, assignment.value); !status.ok()) {
      return InternalError("line " + std::to_string(assignment.line) + ": " + status.message());
    }
  }
  return file;
}

std::string RenderEnvFile(const EnvFile& file) {
  std::string out;
  for (const EnvEntry& entry : file.entries()) {
    out += RenderLine(entry);
    out += '\n';
  }
  return out;
}

Result<std::string> MergeEnvFile(std::string_view existing, const EnvFile& updates) {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<Assignment> assignments,
                           env_file_internal::ParseAssignments(existing));

  // Only the last assignment of a key takes effect, so that is the one rewritten;
  // earlier ones are already overridden and stay as the operator wrote them.
  std::unordered_map<std::string_view, const Assignment*> effective;
  for (const Assignment& assignment : assignments) {
    effective[assignment.key] = &assignment;
  }

  struct Rewrite {
    const Assignment* assignment;
    const EnvEntry* entry;
  };
  std::vector<Rewrite> rewrites;
  std::vector<const EnvEntry*> appends;
  for (const EnvEntry& entry : updates.entries()) {
    const auto it = effective.find(entry.key);
    if (it == effective.end()) {
      appends.push_back(&entry);
    } else if (it->second->value != entry.value) {
      rewrites.push_back({it->second, &entry});
    }
  }
  std::sort(rewrites.begin(), rewrites.end(), [](const Rewrite& a, const Rewrite& b) {
    return a.assignment->begin < b.assignment->begin;
  });

  std::string out;
  out.reserve(existing.size());
  std::size_t copied = 0;  // existing[0, copied) is already in `out`
  for (const Rewrite& rewrite : rewrites) {
    const Assignment& old = *rewrite.assignment;
    out.append(existing.substr(copied, old.begin - copied));
    out += RenderLine(*rewrite.entry);
    out.append(existing.substr(old.line_end, old.end - old.line_end));  // same line ending
    copied = old.end;
  }
  out.append(existing.substr(copied));

  if (!appends.empty() && !out.empty() && out.back() != '\n') {
    out += '\n';
  }
  for (const EnvEntry* entry : appends) {
    out += RenderLine(*entry);
    out += '\n';
  }
  if (out.size() > kMaxEnvFileBytes) {
    return InvalidArgumentError("merged env file would be " + std::to_string(out.size()) +
                                " bytes; the limit is " + std::to_string(kMaxEnvFileBytes) +
                                " bytes (1 MiB)");
  }
  return out;
}

}  // namespace expanse
