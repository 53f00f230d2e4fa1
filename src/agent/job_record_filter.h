// Which of SLURM's job records a controller round needs to send. squeue lists every job each
// 10 s round, and most rounds change nothing in a job but the time it was seen: sending them
// all makes a large site's server rewrite some 2,500 job rows a second (docs/scaling.md) under
// its one writers' lock. So a record goes out when it says something the last one queued for
// its job did not, and an unchanged one again after `refresh`, less up to a quarter of it
// chosen per job (the server's observed_ms then moves on, and a row the server lost — a
// restored database, a batch the outbox gave up on — comes back). The per-job share spreads
// the refreshes: after a restart every job is sent in one round, and without it they would all
// come due again together, every `refresh`, as one large write.
//
// sacct's records of ended jobs do not go through it (controller_round.cc): a job's final
// record is sent at every query that covers it.
//
// What is left out is what the server already holds, a record whose only news is observed_ms:
// the stored row is the same job with an older observation time, which nothing but the
// upsert's ordering reads (docs/formats/ingest-batch.md). Unless the batch that carried the
// last change never reached the store (the outbox gave it up, or dropped it when full): then
// the refresh brings the change, if SLURM still lists the job. A round's records are noted only
// when its batch is in the outbox (Commit); a batch that could not be queued leaves nothing noted
// (Abandon), so its records go out again next round.
#ifndef EXPANSE_AGENT_JOB_RECORD_FILTER_H_
#define EXPANSE_AGENT_JOB_RECORD_FILTER_H_

#include <cstdint>
#include <map>
#include <string>

#include "wire/records.h"

namespace expanse::agent {

class JobRecordFilter {
 public:
  static constexpr int64_t kDefaultRefreshMs = 5 * 60 * 1000;
  // Jobs remembered at most; beyond, a new job's records are all sent (as before this filter)
  // until SLURM forgets enough jobs. 25,000 listed jobs is a large site (docs/scaling.md).
  static constexpr size_t kMaxJobs = 200'000;

  explicit JobRecordFilter(int64_t refresh_ms = kDefaultRefreshMs, size_t max_jobs = kMaxJobs)
      : refresh_ms_(refresh_ms), max_jobs_(max_jobs) {}

  // Whether `job` goes into this round's batch: it differs from the last record queued for its
  // job (or from one this round already took), or that one is due for its refresh.
  bool Take(const wire::JobRecord& job, int64_t now_ms);
  // This round's batch is in the outbox: what it took is what the server will hold. Jobs no
  // round has listed for two refresh periods are forgotten (SLURM forgot them first).
  void Commit(int64_t now_ms);
  // This round's batch was not queued: nothing it took counts as sent.
  void Abandon() { taken_.clear(); }

  size_t remembered() const { return sent_.size(); }

 private:
  struct Sent {
    wire::JobRecord record;  // observed_ms: when it was queued
    int64_t listed_ms = 0;   // the last round that listed the job, sent or not
  };
  // How long an unchanged record of `job_id` waits: refresh less its share, 0 to a quarter.
  int64_t RefreshAfterMs(const std::string& job_id) const;

  const int64_t refresh_ms_;
  const size_t max_jobs_;
  std::map<std::string, Sent> sent_;
  std::map<std::string, wire::JobRecord> taken_;  // this round's, by job id
};

// The two records describe the job alike, whenever each was observed.
bool SameJobRecord(const wire::JobRecord& a, const wire::JobRecord& b);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_JOB_RECORD_FILTER_H_
