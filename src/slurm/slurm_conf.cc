#include "slurm/slurm_conf.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

#include "core/quote.h"
#include "slurm/slurm_conf_syntax.h"

namespace expanse::slurm {
namespace {

using conf_syntax::IsConfSpace;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; };
    return lower(x) == lower(y);
  });
}

std::string Trim(std::string_view text) {
  while (!text.empty() && IsConfSpace(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && IsConfSpace(text.back()))
    text.remove_suffix(1);
  return std::string(text);
}

std::string Where(const std::string& path, int line) { return path + ":" + std::to_string(line); }

Status SyntaxError(const std::string& where, const std::string& what) {
  return InvalidArgumentError(where + ": " + what).WithReason("slurm_conf_syntax");
}

std::string MiB(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// parse_config.c's _add_full_path: a relative name is joined to the including file's directory
// (the man page says slurm.conf's directory; the two differ only for nested includes).
std::string ResolveIncludePath(const std::string& including_file, const std::string& name) {
  if (name.starts_with('/'))
    return name;
  const std::size_t slash = including_file.rfind('/');
  return (slash == std::string::npos ? including_file : including_file.substr(0, slash)) + "/" +
         name;
}

class ConfReader {
 public:
  explicit ConfReader(const SlurmConfFileReader& read) : read_(read) {}

  Status ReadFile(const std::string& path, const std::string& included_at, int depth);

  std::vector<SlurmConfFile> TakeFiles() { return std::move(files_); }
  std::vector<SlurmConfAssignment> TakeAssignments() { return std::move(assignments_); }

 private:
  Status CheckLimits(const std::string& path, const std::string& included_at, int depth);
  Status ReadContents(const std::string& path, const std::string& included_at);
  Status FollowInclude(const conf_syntax::IncludeDirective& include, const std::string& path,
                       int line, int depth);

  const SlurmConfFileReader& read_;
  std::vector<std::string> include_chain_;  // lexically normal paths of the files being read
  std::vector<SlurmConfFile> files_;
  std::vector<SlurmConfAssignment> assignments_;
  std::optional<std::string> cluster_name_;  // the last ClusterName read so far, for %c
  std::size_t total_bytes_ = 0;
  int reads_ = 0;
  std::string contents_;  // of the file ReadContents read last
};

Status ConfReader::CheckLimits(const std::string& path, const std::string& included_at, int depth) {
  if (depth > kMaxSlurmConfIncludeDepth) {
    return SyntaxError(included_at, "Include nested more than " +
                                        std::to_string(kMaxSlurmConfIncludeDepth) + " files deep");
  }
  const std::string normal = std::filesystem::path(path).lexically_normal().string();
  if (std::find(include_chain_.begin(), include_chain_.end(), normal) != include_chain_.end()) {
    std::string chain;
    for (const std::string& file : include_chain_)
      chain += file + " -> ";
    return SyntaxError(included_at, "Include cycle: " + chain + normal);
  }
  if (++reads_ > kMaxSlurmConfReads) {
    return ResourceExhaustedError(included_at + ": more than " +
                                  std::to_string(kMaxSlurmConfReads) +
                                  " configuration files read through Include")
        .WithReason("slurm_conf_too_large");
  }
  return OkStatus();
}

Status ConfReader::ReadContents(const std::string& path, const std::string& included_at) {
  const std::size_t left = kMaxSlurmConfTotalBytes - total_bytes_;
  const std::size_t limit = std::min(kMaxSlurmConfFileBytes, left);
  Result<std::optional<std::string>> read = read_(path, limit);
  if (!read.ok()) {
    if (read.status().code() != StatusCode::kResourceExhausted)
      return read.status();
    const std::string what =
        limit < kMaxSlurmConfFileBytes
            ? "the configuration files together exceed " + MiB(kMaxSlurmConfTotalBytes)
            : "larger than " + MiB(kMaxSlurmConfFileBytes) +
                  "; is it really a SLURM configuration file?";
    return ResourceExhaustedError(path + ": " + what).WithReason("slurm_conf_too_large");
  }
  if (!read->has_value()) {
    std::string message =
        (included_at.empty() ? "" : included_at + ": Include ") + path + ": no such file";
    if (path.find_first_of("*?[") != std::string::npos)
      message += " (SLURM reads Include paths literally; it does not expand wildcards)";
    return NotFoundError(message).WithReason("slurm_conf_not_found");
  }
  contents_ = std::move(**read);
  total_bytes_ += contents_.size();
  if (const std::size_t nul = contents_.find('\0'); nul != std::string::npos) {
    const int line =
        1 + static_cast<int>(std::count(contents_.begin(), contents_.begin() + nul, '\n'));
    return SyntaxError(Where(path, line), "NUL byte; this is not a text file");
  }
  return OkStatus();
}

Status ConfReader::FollowInclude(const conf_syntax::IncludeDirective& include,
                                 const std::string& path, int line, int depth) {
  const std::string where = Where(path, line);
  if (include.file.empty())
    return SyntaxError(where, "Include without a file name");
  if (!conf_syntax::IsBlank(include.rest)) {
    return SyntaxError(where,
                       "text after the Include file name: " + QuoteForMessage(Trim(include.rest)));
  }
  // _parse_for_format: each %c is the ClusterName read so far, lower-cased.
  std::string name = include.file;
  for (std::size_t at = name.find("%c"); at != std::string::npos; at = name.find("%c", at)) {
    if (!cluster_name_.has_value())
      return SyntaxError(where, "Include uses %c but no ClusterName is set before it");
    std::string lower = *cluster_name_;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; });
    name.replace(at, 2, lower);
    at += lower.size();
  }
  return ReadFile(ResolveIncludePath(path, name), where, depth + 1);
}

Status ConfReader::ReadFile(const std::string& path, const std::string& included_at, int depth) {
  EXPANSE_RETURN_IF_ERROR(CheckLimits(path, included_at, depth));
  EXPANSE_RETURN_IF_ERROR(ReadContents(path, included_at));
  const std::string contents = std::move(contents_);
  if (std::none_of(files_.begin(), files_.end(),
                   [&](const SlurmConfFile& file) { return file.path == path; })) {
    files_.push_back({path, contents});
  }
  include_chain_.push_back(std::filesystem::path(path).lexically_normal().string());
  for (const conf_syntax::LogicalLine& line : conf_syntax::SplitLogicalLines(contents)) {
    if (conf_syntax::IsBlank(line.text))
      continue;
    if (const auto include = conf_syntax::MatchInclude(line.text)) {
      EXPANSE_RETURN_IF_ERROR(FollowInclude(*include, path, line.first_line, depth));
      continue;
    }
    std::optional<conf_syntax::KeyValue> match = conf_syntax::MatchKeyValue(line.text);
    if (!match.has_value()) {
      return SyntaxError(Where(path, line.first_line),
                         "expected key=value, got " + QuoteForMessage(Trim(line.text)));
    }
    if (EqualsIgnoreCase(match->key, "ClusterName"))
      cluster_name_ = match->value;
    assignments_.push_back({path, line.first_line, line.last_line, line.begin, line.end,
                            std::move(match->key), std::move(match->value), Trim(match->rest)});
  }
  include_chain_.pop_back();
  return OkStatus();
}

}  // namespace

SlurmConf::SlurmConf(std::string main_path, std::vector<SlurmConfFile> files,
                     std::vector<SlurmConfAssignment> assignments)
    : main_path_(std::move(main_path)),
      files_(std::move(files)),
      assignments_(std::move(assignments)) {}

const SlurmConfFile* SlurmConf::FindFile(std::string_view path) const {
  for (const SlurmConfFile& file : files_) {
    if (file.path == path)
      return &file;
  }
  return nullptr;
}

std::vector<const SlurmConfAssignment*> SlurmConf::AssignmentsOf(std::string_view key) const {
  std::vector<const SlurmConfAssignment*> found;
  for (const SlurmConfAssignment& assignment : assignments_) {
    if (EqualsIgnoreCase(assignment.key, key))
      found.push_back(&assignment);
  }
  return found;
}

const SlurmConfAssignment* SlurmConf::EffectiveAssignment(std::string_view key) const {
  for (auto it = assignments_.rbegin(); it != assignments_.rend(); ++it) {
    if (EqualsIgnoreCase(it->key, key))
      return &*it;
  }
  return nullptr;
}

std::optional<std::string> SlurmConf::EffectiveValue(std::string_view key) const {
  const SlurmConfAssignment* assignment = EffectiveAssignment(key);
  if (assignment == nullptr)
    return std::nullopt;
  return assignment->value;
}

Result<SlurmConf> ParseSlurmConf(const std::string& main_path, const SlurmConfFileReader& read) {
  if (!main_path.starts_with('/')) {
    return InvalidArgumentError("slurm.conf path " + QuoteForMessage(main_path, 200) +
                                " is not absolute")
        .WithReason("slurm_conf_syntax");
  }
  ConfReader reader(read);
  EXPANSE_RETURN_IF_ERROR(reader.ReadFile(main_path, "", 0));
  return SlurmConf(main_path, reader.TakeFiles(), reader.TakeAssignments());
}

}  // namespace expanse::slurm
