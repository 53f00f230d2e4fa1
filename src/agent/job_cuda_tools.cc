#include "agent/job_cuda_tools.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "attribution/file_reader.h"
#include "attribution/process_environ.h"

namespace expanse::agent {

// nullopt when the environment could not be read (gone, denied).
std::optional<bool> JobCudaTools::RunsTool(int pid, uint64_t* bytes) const {
  const attribution::FileReader& reader =
      options_.reader != nullptr ? *options_.reader : attribution::SystemFileReader();
  Result<attribution::CappedFile> file = reader.Read(
      options_.proc_root + "/" + std::to_string(pid) + "/environ", options_.max_environ_bytes);
  if (!file.ok())
    return std::nullopt;
  *bytes += file->bytes.size();
  Result<attribution::SlurmEnviron> parsed =
      attribution::ParseProcessEnviron(file->bytes, file->truncated);
  return parsed.ok() && parsed->cuda_tool.has_value();
}

std::set<uint32_t> JobCudaTools::Scan(int64_t now_ms,
                                      const std::map<uint32_t, std::vector<int>>& pids) {
  // What to read this scan, most urgent first: processes never read, then those read once
  // (a pid caught between slurmstepd's fork and its exec shows slurmstepd's environment),
  // then those due for a recheck, oldest first.
  std::vector<std::tuple<int, int64_t, int>> due;  // (urgency, read_ms, pid)
  for (const auto& [job, job_pids] : pids) {
    for (int pid : job_pids) {
      auto known = seen_.find(pid);
      if (known == seen_.end())
        due.emplace_back(0, 0, pid);
      else if (known->second.reads < 2)
        due.emplace_back(1, known->second.read_ms, pid);
      else if (now_ms - known->second.read_ms >= recheck_ms_ || now_ms < known->second.read_ms)
        due.emplace_back(2, known->second.read_ms, pid);
    }
  }
  std::sort(due.begin(), due.end());
  uint64_t bytes = 0;
  size_t reads = 0;
  std::map<int, Seen> read_now;
  for (const auto& [urgency, read_ms, pid] : due) {
    if (reads >= budget_.max_reads || bytes >= budget_.max_bytes)
      break;  // the rest waits for the next scan
    ++reads;
    const std::optional<bool> tool = RunsTool(pid, &bytes);
    const auto known = seen_.find(pid);
    read_now[pid] = {now_ms, tool.value_or(false),
                     (known == seen_.end() ? 0 : known->second.reads) + 1};
  }
  std::map<int, Seen> seen;
  std::set<uint32_t> jobs;
  for (const auto& [job, job_pids] : pids) {
    for (int pid : job_pids) {
      auto entry = read_now.find(pid);
      if (entry == read_now.end()) {
        entry = seen_.find(pid);
        if (entry == seen_.end())
          continue;  // not read yet: the next scan reads it first
      }
      if (entry->second.tool)
        jobs.insert(job);
      seen.emplace(pid, entry->second);
    }
  }
  seen_ = std::move(seen);  // processes gone are forgotten, so a reused pid is read afresh
  return jobs;
}

}  // namespace expanse::agent
