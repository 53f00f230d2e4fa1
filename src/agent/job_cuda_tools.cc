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
  // What to read this scan: processes never read, and then those read once (a pid caught
  // between slurmstepd's fork and its exec shows slurmstepd's environment) or due for a
  // recheck, oldest first. Within each, the jobs take turns (each job's first process before
  // any job's second), and a quarter of the budget is kept for the looks again, so a job that
  // starts hundreds of processes a second delays no other job's tool.
  struct Due {
    size_t turn;  // the process's place among its job's
    int urgency;  // 1: a second look, 2: a recheck
    int64_t read_ms;
    int pid;
    bool operator<(const Due& o) const {
      return std::tie(turn, urgency, read_ms, pid) < std::tie(o.turn, o.urgency, o.read_ms, o.pid);
    }
  };
  std::vector<Due> fresh, again;
  for (const auto& [job, job_pids] : pids) {
    size_t fresh_turn = 0, again_turn = 0;
    for (int pid : job_pids) {
      auto known = seen_.find(pid);
      if (known == seen_.end())
        fresh.push_back({fresh_turn++, 0, 0, pid});
      else if (known->second.reads < 2)
        again.push_back({again_turn++, 1, known->second.read_ms, pid});
      else if (now_ms - known->second.read_ms >= recheck_ms_ || now_ms < known->second.read_ms)
        again.push_back({again_turn++, 2, known->second.read_ms, pid});
    }
  }
  std::sort(fresh.begin(), fresh.end());
  std::sort(again.begin(), again.end());
  uint64_t bytes = 0;
  size_t reads = 0;
  std::map<int, Seen> read_now;
  const auto read = [&](const std::vector<Due>& list, size_t& next, size_t until_reads) {
    for (; next < list.size() && reads < until_reads && bytes < budget_.max_bytes; ++next) {
      ++reads;
      const int pid = list[next].pid;
      const std::optional<bool> tool = RunsTool(pid, &bytes);
      const auto known = seen_.find(pid);
      read_now[pid] = {now_ms, tool.value_or(false),
                       (known == seen_.end() ? 0 : known->second.reads) + 1};
    }
  };
  size_t next_fresh = 0, next_again = 0;
  read(fresh, next_fresh, budget_.max_reads - budget_.max_reads / 4);
  read(again, next_again, budget_.max_reads);
  read(fresh, next_fresh, budget_.max_reads);  // what the looks again left
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
