// Aggregator::ReadWorkerHealth: the workers' health reports (<host dir>/health.rec), read
// with the same hostile-file rules as spool files.
#include <utility>

#include "core/quote.h"
#include "spool/aggregator.h"
#include "spool/hostile_read.h"
#include "spool/reasons.h"

namespace expanse::spool {

// Not the guide's "workers: N of M sampled worker nodes": that counts the workers supplying
// one optional capability (the console's capability table), this the workers reporting at all.
std::string WorkerHealthSnapshot::Summary() const {
  return "worker health: " + std::to_string(fresh) + " of " + std::to_string(hosts) +
         " sampled worker nodes reporting";
}

Result<WorkerHealthSnapshot> Aggregator::ReadWorkerHealth(int64_t now_ms) {
  WorkerHealthSnapshot snapshot;
  DrainStats scratch;  // collects refusals; host directories are disposed of by DrainOnce
  {
    std::lock_guard lock(mu_);
    quarantine_.BeginRound();
  }
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> hosts, ListHosts());
  const HostileReadLimits limits{options_.expected_uid, options_.max_health_file_bytes};
  for (const std::string& host : hosts) {
    const fs::UniqueFd dir = OpenHost(host, /*dispose_refused=*/false, scratch);
    if (!dir.valid())
      continue;
    ++snapshot.hosts;
    const std::string host_path = fs::JoinPath(options_.spool_root, host);
    Result<std::string_view> bytes =
        ReadHostileFile(dir.get(), host_path, kHealthFileName, limits, health_buffer_);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kDataLoss) {
        Refuse(dir.get(), host, kHealthFileName, bytes.status().reason(), bytes.status(), scratch);
      } else if (bytes.status().code() != StatusCode::kNotFound) {
        ++scratch.bad_by_reason[reason::kUnreadable];
      }
      continue;
    }
    Result<SpoolFile> file = DecodeSpoolFile(*bytes);
    if (!file.ok()) {
      Refuse(dir.get(), host, kHealthFileName, file.status().reason(), file.status(), scratch);
      continue;
    }
    if (file->host != host) {
      Refuse(dir.get(), host, kHealthFileName, reason::kHostMismatch,
             DataLossError("report says host " + QuoteForMessage(file->host)), scratch);
      continue;
    }
    if (file->records.size() != 1 || file->records[0].kind != kHealthRecordKind) {
      Refuse(dir.get(), host, kHealthFileName, reason::kMalformed,
             DataLossError("a health file holds exactly one worker_health record"), scratch);
      continue;
    }
    WorkerHealthReport report;
    report.host = host;
    report.boot_id = std::move(file->boot_id);
    report.written_ms = file->created_ms;
    report.payload = std::move(file->records[0].payload);
    // Symmetric window: a worker clock running ahead must not keep a dead worker fresh.
    report.fresh = report.written_ms >= now_ms - options_.health_max_age_ms &&
                   report.written_ms <= now_ms + options_.health_max_age_ms;
    snapshot.fresh += report.fresh ? 1 : 0;
    snapshot.reports.push_back(std::move(report));
  }
  snapshot.bad_by_reason = std::move(scratch.bad_by_reason);
  return snapshot;
}

}  // namespace expanse::spool
