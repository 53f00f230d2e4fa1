#include "agent/job_record_filter.h"

#include <functional>
#include <tuple>

namespace expanse::agent {
namespace {

auto Described(const wire::JobRecord& j) {
  return std::tie(j.job_id, j.name, j.user, j.account, j.partition, j.state, j.nodes, j.submit_ms,
                  j.start_ms, j.end_ms, j.req_nodes, j.req_cpus, j.req_gpus, j.req_mem_mib,
                  j.time_limit_s);
}

}  // namespace

bool SameJobRecord(const wire::JobRecord& a, const wire::JobRecord& b) {
  return Described(a) == Described(b);
}

bool JobRecordFilter::Take(const wire::JobRecord& job, int64_t now_ms) {
  auto sent = sent_.find(job.job_id);
  if (sent != sent_.end())
    sent->second.listed_ms = now_ms;
  // squeue and sacct may both list a job in one round: the second record is news only if it
  // differs from the first.
  if (auto taken = taken_.find(job.job_id); taken != taken_.end()) {
    if (SameJobRecord(taken->second, job))
      return false;
    taken->second = job;
    return true;
  }
  if (sent != sent_.end() && SameJobRecord(sent->second.record, job) &&
      now_ms - sent->second.record.observed_ms < RefreshAfterMs(job.job_id))
    return false;
  taken_.emplace(job.job_id, job);
  return true;
}

int64_t JobRecordFilter::RefreshAfterMs(const std::string& job_id) const {
  const int64_t spread = refresh_ms_ / 4;
  if (spread <= 0)
    return refresh_ms_;
  return refresh_ms_ -
         static_cast<int64_t>(std::hash<std::string>{}(job_id) % static_cast<uint64_t>(spread));
}

void JobRecordFilter::Commit(int64_t now_ms) {
  // Forgotten first, so that their room goes to this round's new jobs.
  std::erase_if(
      sent_, [&](const auto& entry) { return now_ms - entry.second.listed_ms >= 2 * refresh_ms_; });
  for (auto& [id, record] : taken_) {
    auto it = sent_.find(id);
    if (it == sent_.end()) {
      if (sent_.size() >= max_jobs_)
        continue;  // not remembered: its next record is sent again
      it = sent_.emplace(id, Sent{}).first;
    }
    Sent& sent = it->second;
    sent.record = std::move(record);
    sent.listed_ms = now_ms;
  }
  taken_.clear();
}

}  // namespace expanse::agent
