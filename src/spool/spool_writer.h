// The worker side of the spool: batches records in memory and hands them to the controller
// as one spool file per Flush in <spool_root>/<hostname>/, written atomically. It holds no
// credential; the shared directory is its only channel to the controller.
//
// Bounded on purpose: a batch in memory is capped (Add refuses past it), and a Flush that
// would take the host directory past its byte budget or file-count cap drops the batch
// instead. Every refused record is counted (counters()), so a worker whose controller stopped
// draining loses recent data visibly rather than filling the shared file system.
#ifndef EXPANSE_SPOOL_SPOOL_WRITER_H_
#define EXPANSE_SPOOL_SPOOL_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/file_util.h"
#include "core/result.h"
#include "spool/boot_id.h"
#include "spool/spool_file.h"

namespace expanse::spool {

struct SpoolWriterOptions {
  std::string spool_root;  // the shared directory; must exist
  std::string hostname;    // IsValidHostName(); names this worker's directory
  std::string boot_id;     // empty: read from boot_id_path
  std::string boot_id_path = kDefaultBootIdPath;
  // Local (not shared) directory for the writer's sequence state; created if missing.
  std::string state_dir;

  uint64_t max_dir_bytes = 256ull << 20;  // budget for everything in the host directory
  uint32_t max_dir_files = 1000;
  uint64_t max_batch_bytes = 8ull << 20;  // records held in memory between flushes
  uint32_t max_batch_records = 100'000;
  // A Flush sooner than this after the last written file keeps batching and writes nothing,
  // so a caller in a tight loop cannot turn the spool into a stream of small files.
  int64_t min_flush_interval_ms = 5'000;
  int zstd_level = 1;  // see EncodeOptions
  uint64_t max_health_bytes = 64ull << 10;
  std::function<void(std::string_view line)> log;
};

struct SpoolWriterCounters {
  uint64_t records_accepted = 0;
  uint64_t records_written = 0;
  uint64_t files_written = 0;
  uint64_t bytes_written = 0;
  uint64_t records_dropped_batch_full = 0;  // refused by Add: the in-memory batch was full
  uint64_t records_dropped_spool_full = 0;  // dropped by Flush: host directory over budget
  uint64_t write_errors = 0;                // Flush failed; the batch stays for the next one
  uint64_t flushes_deferred = 0;            // Flush within min_flush_interval_ms
  uint64_t health_writes = 0;
};

class SpoolWriter {
 public:
  // Creates <spool_root>/<hostname>/ (mode 0750) if needed and refuses one that is a symlink
  // or belongs to another user. The next sequence continues after the larger of the one in
  // the state file and the highest of this boot's files still in the host directory; a new
  // boot id starts again at 1.
  static Result<std::unique_ptr<SpoolWriter>> Open(SpoolWriterOptions options, Clock& clock);

  // Queues a record for the next Flush. kInvalidArgument (reason "spool_invalid_record") for
  // a bad kind or an oversized payload; kResourceExhausted (reason "spool_batch_full") when
  // the batch is full: the record is dropped and counted.
  Status Add(std::string_view kind, std::string_view payload);
  // Queues all of `records` (kind, payload) or none: records that must travel together (a job
  // event and the allocations derived from it). As Add, and kResourceExhausted with reason
  // "spool_group_too_large" when they would not fit even an empty batch.
  // (Nothing is counted as dropped then: the caller sends them a part at a time.)
  Status AddAll(std::span<const std::pair<std::string, std::string>> records);
  // Whether AddAll(records) would queue them now.
  bool Fits(std::span<const std::pair<std::string, std::string>> records) const;

  // Writes the queued records as one spool file; OK and nothing written when there are none
  // or the last file is younger than min_flush_interval_ms. kResourceExhausted (reason
  // "spool_full") when the host directory's budget would be exceeded: the batch is dropped
  // and counted. On an I/O error the batch is kept for the next Flush.
  // `force` skips the min_flush_interval_ms rule: for the last flush before the sampler exits.
  Status Flush(bool force = false);

  // Atomically replaces <host dir>/health.rec with `payload` (typically JSON) and the
  // current time; the controller treats a report older than two minutes as expired.
  Status WriteHealth(std::string_view payload);

  SpoolWriterCounters counters() const;
  // The sequence number of the last file written (or reserved) in this boot.
  uint64_t last_sequence() const;
  const std::string& boot_id() const { return boot_id_; }
  const std::string& host_dir() const { return host_path_; }

 private:
  SpoolWriter(SpoolWriterOptions options, Clock& clock, std::string boot_id, fs::UniqueFd host_dir,
              fs::UniqueFd state_dir);
  Status RecoverSequence();
  Status CheckBudget(uint64_t file_bytes);
  void Log(const std::string& line);

  const SpoolWriterOptions options_;
  Clock& clock_;
  const std::string boot_id_;
  const std::string host_path_;
  fs::UniqueFd host_dir_;
  fs::UniqueFd state_dir_;

  mutable std::mutex mu_;  // held across Flush's I/O; Add waits for it
  std::vector<SpoolRecord> batch_;
  uint64_t batch_bytes_ = 0;
  uint64_t sequence_ = 0;  // last sequence handed out (and persisted) in this boot
  int64_t last_file_ms_ = 0;
  bool have_written_ = false;
  bool spool_full_logged_ = false;
  SpoolWriterCounters counters_;
};

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_SPOOL_WRITER_H_
