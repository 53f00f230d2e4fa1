#include "attribution/proc_cgroup.h"

#include <cstddef>
#include <string>
#include <vector>

#include "attribution/parse_util.h"
#include "core/quote.h"

namespace expanse::attribution {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

Status Malformed(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("cgroup_malformed");
}

// Lower is more trusted; see ParseProcCgroup.
int Rank(const ProcCgroupLine& line) {
  if (line.hierarchy_id != 0) {
    for (const std::string_view controller : internal::Split(line.controllers, ',')) {
      if (controller == "devices") {
        return 0;
      }
    }
    return 2;
  }
  return line.controllers.empty() ? 1 : 2;
}

}  // namespace

Result<ProcCgroupLine> ParseProcCgroupLine(std::string_view line) {
  const size_t first_colon = line.find(':');
  const size_t second_colon =
      first_colon == std::string_view::npos ? first_colon : line.find(':', first_colon + 1);
  if (second_colon == std::string_view::npos) {
    return Malformed("expected \"hierarchy-id:controllers:path\", got " + QuoteForMessage(line));
  }
  ProcCgroupLine parsed;
  const std::optional<uint32_t> id = internal::ParseDecimalU32(line.substr(0, first_colon));
  if (!id) {
    return Malformed("hierarchy id " + QuoteForMessage(line.substr(0, first_colon)) +
                     " is not a number");
  }
  parsed.hierarchy_id = *id;
  parsed.controllers = std::string(line.substr(first_colon + 1, second_colon - first_colon - 1));
  std::string_view path = line.substr(second_colon + 1);
  if (path.ends_with(kDeletedSuffix)) {
    path.remove_suffix(kDeletedSuffix.size());
  }
  if (!path.starts_with('/')) {
    return Malformed("cgroup path " + QuoteForMessage(path) + " does not start with '/'");
  }
  parsed.path = std::string(path);
  return parsed;
}

std::optional<CgroupJobPath> FindJobInCgroupPath(std::string_view path) {
  constexpr std::string_view kJobPrefix = "job_";
  constexpr std::string_view kStepPrefix = "step_";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) {
      end = path.size();
    }
    const std::string_view component = path.substr(start, end - start);
    // slurmstepd prints the id with %u: no sign, no leading zero, so "job_061" is not job 61.
    if (component.starts_with(kJobPrefix) &&
        !component.substr(kJobPrefix.size()).starts_with('0')) {
      const std::optional<uint32_t> job_id =
          internal::ParseDecimalU32(component.substr(kJobPrefix.size()));
      if (job_id) {
        CgroupJobPath found;
        found.job_id = *job_id;
        found.job_cgroup = std::string(path.substr(0, end));
        if (end < path.size()) {
          const std::string_view rest = path.substr(end + 1);
          const std::string_view next = rest.substr(0, rest.find('/'));
          if (next.starts_with(kStepPrefix) && next.size() > kStepPrefix.size()) {
            found.step = std::string(next.substr(kStepPrefix.size()));
          }
        }
        return found;
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

Result<std::optional<CgroupPlacement>> ParseProcCgroup(std::string_view text) {
  std::optional<CgroupPlacement> best;
  int best_rank = 0;
  std::string first_job_line;  // for the conflict message
  size_t line_number = 0;
  for (std::string_view line : internal::Split(text, '\n')) {
    ++line_number;
    if (line.empty()) {
      continue;  // the file ends with a newline
    }
    Result<ProcCgroupLine> parsed = ParseProcCgroupLine(line);
    if (!parsed.ok()) {
      return Malformed("cgroup line " + std::to_string(line_number) + ": " +
                       parsed.status().message());
    }
    std::optional<CgroupJobPath> job = FindJobInCgroupPath(parsed->path);
    if (!job) {
      continue;
    }
    const std::string where = parsed->controllers.empty() ? "the unified hierarchy"
                                                          : QuoteForMessage(parsed->controllers);
    if (best && best->job.job_id != job->job_id) {
      return InvalidArgumentError("cgroup lines disagree: " + first_job_line + " names job " +
                                  std::to_string(best->job.job_id) + ", " + where + " names job " +
                                  std::to_string(job->job_id))
          .WithReason("cgroup_conflict");
    }
    const int rank = Rank(*parsed);
    if (!best) {
      first_job_line = where;
    }
    if (!best || rank < best_rank) {
      best_rank = rank;
      best =
          CgroupPlacement{std::move(*job), parsed->controllers, parsed->hierarchy_id == 0 ? 2 : 1};
    }
  }
  return best;
}

}  // namespace expanse::attribution
