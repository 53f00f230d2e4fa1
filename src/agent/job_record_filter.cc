#include "agent/job_record_filter.h"

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
      now_ms - sent->second.record.observed_ms < refresh_ms_)
    return false;
  taken_.emplace(job.job_id, job);
  return true;
}

void JobRecordFilter::Commit(int64_t now_ms) {
  for (auto& [id, record] : taken_) {
    Sent& sent = sent_[id];
    sent.record = std::move(record);
    sent.listed_ms = now_ms;
  }
  taken_.clear();
  std::erase_if(
      sent_, [&](const auto& entry) { return now_ms - entry.second.listed_ms >= 2 * refresh_ms_; });
}

}  // namespace expanse::agent
