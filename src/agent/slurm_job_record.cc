#include "agent/slurm_job_record.h"

#include <algorithm>

#include "core/utf8.h"
#include "wire/field_reader.h"

namespace expanse::agent {
namespace {

int64_t FitTime(int64_t ms) { return std::clamp<int64_t>(ms, 0, wire::kMaxTimeMs); }

int64_t FitCount(int64_t n) { return std::max<int64_t>(n, 0); }

}  // namespace

bool StorableJobId(const std::string& job_id) {
  return !job_id.empty() && job_id.find('[') == std::string::npos &&
         job_id.size() <= wire::kMaxJobIdBytes && wire::IsCleanText(job_id);
}

bool SendableJob(const slurm::JobInfo& job) {
  return StorableJobId(job.job_id) && !job.state.empty();
}

std::string FitNodeList(const std::string& nodes, size_t max_bytes) {
  std::string clean = CleanText(nodes, std::string::npos);
  if (clean.size() <= max_bytes)
    return clean;
  // Candidates within the limit: the text before a top-level comma, or before a comma inside
  // a bracket plus the ']' that closes it (one byte more, so it must end before max_bytes).
  size_t top_cut = 0;
  size_t bracket_cut = 0;
  int depth = 0;
  for (size_t i = 0; i <= max_bytes && i < clean.size(); ++i) {
    const char c = clean[i];
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      depth = std::max(depth - 1, 0);  // a stray ']' does not hide later entries
    } else if (c == ',' && depth == 0) {
      top_cut = i;
    } else if (c == ',' && depth == 1 && i < max_bytes) {
      bracket_cut = i;
    }
  }
  if (bracket_cut > top_cut) {
    clean.resize(bracket_cut);
    clean += ']';
  } else {
    clean.resize(top_cut);
  }
  return clean;
}

wire::JobRecord SlurmJobRecord(const slurm::JobInfo& job, int64_t observed_ms) {
  wire::JobRecord r{.job_id = job.job_id,
                    .name = CleanText(job.name, wire::kMaxJobNameBytes),
                    .user = CleanText(job.user, wire::kMaxJobWordBytes),
                    .account = CleanText(job.account, wire::kMaxJobWordBytes),
                    .partition = CleanText(job.partition, wire::kMaxJobWordBytes),
                    .state = CleanText(job.state, wire::kMaxJobStateBytes),
                    .nodes = FitNodeList(job.nodes),
                    .submit_ms = FitTime(job.submit_ms),
                    .start_ms = FitTime(job.start_ms),
                    .end_ms = FitTime(job.end_ms),
                    .req_nodes = FitCount(job.req_nodes),
                    .req_cpus = FitCount(job.req_cpus),
                    .req_gpus = FitCount(job.req_gpus),
                    .req_mem_mib = FitCount(job.req_mem_mib),
                    .time_limit_s = FitCount(job.time_limit_s),
                    .observed_ms = FitTime(observed_ms)};
  if (r.start_ms != 0 && r.end_ms != 0 && r.end_ms < r.start_ms)
    r.end_ms = 0;
  return r;
}

}  // namespace expanse::agent
