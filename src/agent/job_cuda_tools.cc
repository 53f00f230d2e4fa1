#include "agent/job_cuda_tools.h"

#include <string>
#include <utility>

#include "attribution/file_reader.h"
#include "attribution/process_environ.h"

namespace expanse::agent {

bool JobCudaTools::RunsTool(int pid) const {
  const attribution::FileReader& reader =
      options_.reader != nullptr ? *options_.reader : attribution::SystemFileReader();
  Result<attribution::CappedFile> file = reader.Read(
      options_.proc_root + "/" + std::to_string(pid) + "/environ", options_.max_environ_bytes);
  if (!file.ok())
    return false;
  Result<attribution::SlurmEnviron> parsed =
      attribution::ParseProcessEnviron(file->bytes, file->truncated);
  return parsed.ok() && parsed->cuda_tool.has_value();
}

std::set<uint32_t> JobCudaTools::Scan(int64_t now_ms,
                                      const std::map<uint32_t, std::vector<int>>& pids) {
  std::map<int, Seen> seen;
  std::set<uint32_t> jobs;
  for (const auto& [job, job_pids] : pids) {
    for (int pid : job_pids) {
      auto known = seen_.find(pid);
      Seen entry;
      if (known != seen_.end() && now_ms - known->second.read_ms < recheck_ms_ &&
          now_ms >= known->second.read_ms) {
        entry = known->second;
      } else {
        entry = {now_ms, RunsTool(pid)};
      }
      if (entry.tool)
        jobs.insert(job);
      seen.emplace(pid, entry);
    }
  }
  seen_ = std::move(seen);  // processes gone are forgotten, so a reused pid is read afresh
  return jobs;
}

}  // namespace expanse::agent
