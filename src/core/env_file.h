// Reading, writing and merging systemd EnvironmentFile= files such as
// /etc/expanse/daemon.env. The accepted syntax, and where it is stricter than
// systemd, is written down in docs/formats/env-file.md.
//
// Everything here is a pure function of its arguments (no file access), so the
// same code serves the installer, the daemon, fixtures and the fuzzer.

#ifndef EXPANSE_CORE_ENV_FILE_H_
#define EXPANSE_CORE_ENV_FILE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse {

// Larger inputs are rejected before parsing. A settings file is a few kilobytes;
// the cap bounds the work done on a hostile or mistaken path (a log, a binary).
inline constexpr std::size_t kMaxEnvFileBytes = std::size_t{1} << 20;

struct EnvEntry {
  std::string key;
  std::string value;

  friend bool operator==(const EnvEntry& a, const EnvEntry& b) = default;
};

// True when `key` matches [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvKey(std::string_view key);

// An ordered set of KEY=VALUE entries with unique keys.
// Invariant: every key satisfies IsValidEnvKey and every value is valid UTF-8
// without NUL bytes, so every EnvFile can be rendered and parsed back unchanged.
class EnvFile {
 public:
  // Replaces the value of an existing key in place (its position stays), or appends
  // a new entry. kInvalidArgument when the key or value breaks the invariant.
  Status Set(std::string_view key, std::string_view value);

  // The value for `key`, if present. The view is valid until the next Set().
  std::optional<std::string_view> Get(std::string_view key) const;

  const std::vector<EnvEntry>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<EnvEntry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // key -> position in entries_
};

// Parses the text of an environment file. A key assigned more than once keeps the
// position of its first assignment and the value of its last, which is the
// environment systemd builds. Errors are kInvalidArgument with a message naming
// the 1-based line, e.g. `line 3: missing '=' after key "FOO"`.
Result<EnvFile> ParseEnvFile(std::string_view text);

// One KEY=VALUE line per entry, in order. Values that are not plain words are
// double-quoted with \ " ` $ escaped, so ParseEnvFile(RenderEnvFile(f)) == f.
std::string RenderEnvFile(const EnvFile& file);

// Applies `updates` to the text of an existing environment file while keeping the
// operator's own lines intact: comments, blank lines, spacing, quoting, order and
// the entries not in `updates` are reproduced byte for byte. For a key already
// present, its effective (last) assignment is rewritten in place, or left untouched
// when it already holds the new value, so merging twice changes nothing. New keys
// are appended at the end in the order of `updates`. Fails when `existing` does not
// parse: overwriting a file we cannot read could lose an operator's settings.
Result<std::string> MergeEnvFile(std::string_view existing, const EnvFile& updates);

}  // namespace expanse

#endif  // EXPANSE_CORE_ENV_FILE_H_
