// Which of SLURM's job records a controller round needs to send. squeue lists every job each
// 10 s round, and most rounds change nothing in a job but the time it was seen: sending them
// all makes a large site's server rewrite some 2,500 job rows a second (docs/scaling.md) under
// its one writers' lock. So a record goes out when it says something the last one queued for
// its job did not, and an unchanged one at least every `refresh` (the server's observed_ms
// then moves on, and a row the server lost — a restored database — comes back).
//
// What is left out is what the server already holds, a record whose only news is observed_ms:
// the stored row is the same job with an older observation time, which nothing but the
// upsert's ordering reads (docs/formats/ingest-batch.md). A round's records are noted only when
// its batch is in the outbox (Commit); a batch that could not be queued leaves nothing noted
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

  explicit JobRecordFilter(int64_t refresh_ms = kDefaultRefreshMs) : refresh_ms_(refresh_ms) {}

  // Whether `job` goes into this round's batch: it differs from the last record queued for its
  // job (or from one this round already took), or that one was queued `refresh` ago or more.
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
  const int64_t refresh_ms_;
  std::map<std::string, Sent> sent_;
  std::map<std::string, wire::JobRecord> taken_;  // this round's, by job id
};

// The two records describe the job alike, whenever each was observed.
bool SameJobRecord(const wire::JobRecord& a, const wire::JobRecord& b);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_JOB_RECORD_FILTER_H_
