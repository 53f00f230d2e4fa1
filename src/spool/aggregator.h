// The controller side of the spool: drains every worker's host directory into a sink (the
// durable outbox) and reads the workers' health reports. Everything under the spool root is
// hostile input (hostile_read.h); refused entries are quarantined and counted by reason.
//
// Delivery contract: files of one host are handed over in sequence order; a file is deleted
// right after, and only after, the sink returned OK for it; a (host, boot id, sequence)
// already delivered is not handed over again (a file whose delete failed), also across a
// restart once the delivery state reached state_dir (every state_sync_every_files files and
// at the end of each round). What is left: a crash between the sink's OK and the delete, or
// a failed delete and a crash before the next state write, delivers that file again, so a
// sink that must be exactly-once keys its records by (host, boot_id, sequence).
//
// DrainOnce and ReadWorkerHealth are meant for one polling loop: call them one at a time.
#ifndef EXPANSE_SPOOL_AGGREGATOR_H_
#define EXPANSE_SPOOL_AGGREGATOR_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/file_util.h"
#include "core/result.h"
#include "spool/delivery_state.h"
#include "spool/quarantine.h"
#include "spool/spool_file.h"
#include "spool/spool_format.h"

namespace expanse::spool {

struct AggregatorOptions {
  std::string spool_root;
  // Local directory for the delivery state; created if missing.
  std::string state_dir;
  // Owner every spool file and host directory must have: the daemon user the samplers run as.
  uid_t expected_uid = 0;
  uint64_t max_file_bytes = kMaxFileBytes;
  uint64_t max_health_file_bytes = 68ull << 10;  // a 64 KiB report plus the file's framing
  // Writers' temporary files older than this are debris of a crashed writer and removed.
  int64_t stale_temp_age_ms = 10 * 60 * 1000;
  // A health report older (or, with a skewed clock, newer) than this is expired.
  int64_t health_max_age_ms = 2 * 60 * 1000;
  // The delivery state is written (one fsync) after this many delivered files and at the end
  // of a round. It matters only for a delivered file whose delete failed.
  uint32_t state_sync_every_files = 256;
  // Hosts drained in parallel. Per file a round makes about seven file-system calls, each a
  // round trip to the server on NFS, plus a decompression; hosts are independent, so threads
  // mostly overlap waiting. The sink is still called one file at a time, and each host's
  // files in sequence order. 1 drains on the calling thread.
  uint32_t threads = 8;
  QuarantineOptions quarantine;
  std::function<void(std::string_view line)> log;
};

struct HostDrainStats {
  uint64_t files = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t bad = 0;
};

struct DrainStats {
  uint64_t files = 0;    // delivered to the sink (and then deleted)
  uint64_t records = 0;  // in those files
  uint64_t bytes = 0;    // size of those files
  uint64_t bad = 0;      // refused entries, files and host directories
  // reason (reasons.h) -> count: the refusals in `bad`, plus "unreadable" for I/O errors,
  // which are not refusals (the entry stays for the next round) and not in `bad`.
  std::map<std::string, uint64_t> bad_by_reason;
  std::map<std::string, HostDrainStats> per_host;
  uint64_t quarantined = 0;  // refused entries moved to .quarantine
  uint64_t bad_deleted = 0;  // refused entries deleted (quarantine full or unusable)
  uint64_t duplicates = 0;   // delivered before; deleted without calling the sink
  uint64_t stale_temps_removed = 0;
  uint64_t delete_failures = 0;  // delivered files that could not be deleted (retried)
  // The first sink failure; the round stopped there and the file stays for the next one.
  Status sink_status;
};

// "sampler aggregator drained files=N records=M bytes=B bad=K": the line operators grep for.
std::string DrainLogLine(const DrainStats& stats);

struct WorkerHealthReport {
  std::string host;
  std::string boot_id;
  int64_t written_ms = 0;  // the worker's clock when it wrote the report
  std::string payload;     // opaque, as the worker wrote it
  bool fresh = false;      // within health_max_age_ms of the `now` given to ReadWorkerHealth
};

struct WorkerHealthSnapshot {
  std::vector<WorkerHealthReport> reports;  // one per host with a readable report, by host
  uint32_t fresh = 0;                       // reports with fresh == true
  uint32_t hosts = 0;                       // host directories seen (sampled worker nodes)
  std::map<std::string, uint64_t> bad_by_reason;

  // "worker health: N of M sampled worker nodes reporting", for the controller's log.
  std::string Summary() const;
};

class Aggregator {
 public:
  // Called for one file at a time (never concurrently), possibly from a DrainOnce worker
  // thread. OK means the records are durable elsewhere and the file may be deleted.
  // kDataLoss means the file's content is refused: it is quarantined with the status' reason
  // (default "refused_by_sink") and the round goes on. Any other error stops the round and
  // keeps the file for the next one. A sink that throws has its file refused as
  // "sink_exception".
  using Sink = std::function<Status(const SpoolFile& file)>;

  // Opens the spool root (which must exist) and loads the delivery state. A corrupt state
  // file is logged and replaced (at worst some files are delivered again), never fatal.
  static Result<std::unique_ptr<Aggregator>> Open(AggregatorOptions options, Clock& clock);

  // One poll over every host directory. Fails only when the spool root cannot be listed or
  // the delivery state cannot be written (delivered files are then kept; they are known as
  // delivered and go on the next round). Logs DrainLogLine() when options.log is set.
  Result<DrainStats> DrainOnce(const Sink& sink);

  // Every host's health report as of `now_ms` (Unix ms). Bad reports are quarantined.
  Result<WorkerHealthSnapshot> ReadWorkerHealth(int64_t now_ms);

 private:
  struct Candidate {
    std::string name;
    std::string boot_id;
    uint64_t sequence = 0;
  };
  struct Round;   // one DrainOnce call's shared state
  struct Worker;  // one drain thread's own stats and buffer

  Aggregator(AggregatorOptions options, Clock& clock, fs::UniqueFd root, fs::UniqueFd state_dir);

  // Valid host names in the root, sorted. Other names are ignored (logged once).
  Result<std::vector<std::string>> ListHosts();
  // The host directory; invalid when it is refused (counted in `stats` and, with
  // dispose_refused, quarantined unless it is a wrong-owner directory) or vanished.
  fs::UniqueFd OpenHost(const std::string& host, bool dispose_refused, DrainStats& stats);
  void DrainWorker(const std::vector<std::string>& hosts, Round& round, Worker& worker);
  // Stops at the first sink failure, keeping the host's order.
  void DrainHost(const std::string& host, Round& round, Worker& worker);
  std::vector<Candidate> OrderCandidates(const std::string& host, int dir_fd,
                                         std::vector<Candidate> candidates);
  // The sink's answer for `file`, with exceptions turned into kDataLoss.
  static Status CallSink(const Sink& sink, const SpoolFile& file);
  void RemoveIfStaleTemp(int dir_fd, const std::string& name, DrainStats& stats);
  void Refuse(int dir_fd, const std::string& host, const std::string& name,
              const std::string& reason, const Status& why, DrainStats& stats);
  // Writes the delivery state when deliveries since the last write are not on disk yet.
  // Requires mu_.
  Status CommitDeliveredLocked();
  void LogOnce(const std::string& key, const std::string& line);

  const AggregatorOptions options_;
  Clock& clock_;
  fs::UniqueFd root_;
  fs::UniqueFd state_dir_;

  // Guards everything below it. Reading and decoding files runs outside it.
  std::mutex mu_;
  Quarantine quarantine_;
  DeliveryState delivered_;
  uint32_t uncommitted_ = 0;      // deliveries not yet in the state file
  bool sink_failing_ = false;     // the last sink call failed (logged once per episode)
  std::set<std::string> logged_;  // keys of problems already logged; bounded
  std::string health_buffer_;     // ReadWorkerHealth's read buffer (see ReadHostileFile)
};

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_AGGREGATOR_H_
