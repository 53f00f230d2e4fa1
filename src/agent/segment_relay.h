// SegmentRelay: a worker's half of EXPANSE_SEGMENT_UPLOAD_MODE=relay. The sampler's intake
// leaves accepted trace segments in the node-local <control>/capture-ready; the relay moves
// them, a few per flush, into the shared spool's <prefix>/spool/segments/<host>/, where the
// controller (SegmentUploader) takes them to the server. Workers hold no credential.
//
// Telemetry goes first: a segment is relayed only while the host's relay directory stays within
// its bound and the shared file system keeps min_free_bytes free; otherwise it waits in
// capture-ready, which the intake bounds (oldest dropped, counted). The copy is written to a
// temporary, fsync'ed and renamed (docs/formats/segment-relay.md), then the ready file removed:
// a crash leaves the segment in one place or, at worst, in both, and the server keeps one.
#ifndef EXPANSE_AGENT_SEGMENT_RELAY_H_
#define EXPANSE_AGENT_SEGMENT_RELAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace expanse::agent {

// <prefix>/spool/segments: one directory per host beside the telemetry spool's.
std::string SegmentRelayRoot(const std::string& shared_prefix);

struct SegmentFileEntry {
  std::string name;
  int64_t mtime_ns = 0;
  uint64_t bytes = 0;
};

// The segment files of `dir` (seg-….json, regular), oldest first (by modification time).
std::vector<SegmentFileEntry> ListSegmentFiles(const std::string& dir);

struct SegmentRelayOptions {
  std::string ready_dir{};  // <control>/capture-ready, the daemon account's
  std::string relay_dir{};  // <SegmentRelayRoot>/<host>
  uint64_t max_relay_bytes = uint64_t{256} << 20;
  uint64_t min_free_bytes = uint64_t{1} << 30;
  size_t max_files_per_flush = 1;
};

struct SegmentRelayStats {
  uint64_t relayed = 0;
  uint64_t held_for_space = 0;  // flushes that left segments waiting: bound or free space
  uint64_t failed = 0;          // copies that failed (left for the next flush)
  std::string last_problem{};
};

class SegmentRelay {
 public:
  explicit SegmentRelay(SegmentRelayOptions options) : options_(std::move(options)) {}

  // Moves up to max_files_per_flush ready segments, oldest first. Never fails: problems are
  // counted and the segments stay where they are.
  void Flush();
  const SegmentRelayStats& stats() const { return stats_; }

 private:
  SegmentRelayOptions options_;
  SegmentRelayStats stats_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SEGMENT_RELAY_H_
