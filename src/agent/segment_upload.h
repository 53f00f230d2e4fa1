// SegmentUploader: the controller's half of the segment relay (docs/formats/segment-relay.md).
// Takes the trace segments samplers relayed into <prefix>/spool/segments/<host>/ (and, on a GPU
// controller, its own <control>/capture-ready) to the server, `POST /dp/v1/segments`.
//
// Everything in the shared spool is hostile input: a file must be a plain, single-linked file
// of the daemon account's, at most 64 MiB, parse as a trace segment and name the host whose
// directory it is in. A refused file is quarantined (bounded; the oldest go) and counted by
// reason. A segment leaves the spool only once the server answered 200
// (new or duplicate): after a crash at any point it is sent again, and the server, which keeps
// segments by the hash of their bytes, keeps it once. Telemetry goes first: the daemon runs a
// pass only while its outbox has nothing left to send, and a pass sends at most
// max_bytes_per_pass.
#ifndef EXPANSE_AGENT_SEGMENT_UPLOAD_H_
#define EXPANSE_AGENT_SEGMENT_UPLOAD_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/result.h"
#include "net/http_client.h"
#include "outbox/backoff.h"

namespace expanse::agent {

inline constexpr char kSegmentIngestPath[] = "/dp/v1/segments";

// A host directory's name as the telemetry spool allows it (docs/formats/spool.md).
bool IsSpoolHostName(std::string_view name);

struct SegmentUploadOptions {
  std::string relay_root{};     // <prefix>/spool/segments ("" = none)
  std::string own_ready_dir{};  // a GPU controller's <control>/capture-ready ("" = none)
  std::string own_host{};
  // Refused files of own_ready_dir go to <state>/segment-quarantine; relayed ones to
  // <relay_root>/.quarantine (a rename within the shared file system).
  std::string quarantine_dir{};
  std::string data_plane_url{};
  uid_t expected_uid = 0;  // the daemon account the samplers write as
  uint64_t max_bytes_per_pass = uint64_t{128} << 20;
  size_t max_quarantined = 20;
  int64_t backoff_base_ms = 5000;
  int64_t backoff_cap_ms = int64_t{5} * 60 * 1000;
  std::function<void(std::string_view)> log{};
};

struct SegmentUploadStats {
  uint64_t uploaded = 0;
  uint64_t duplicates = 0;                  // ... of which the server had already
  uint64_t bytes = 0;                       // uncompressed bytes uploaded
  uint64_t retries = 0;                     // passes ended by a failed send, kept for later
  std::map<std::string, uint64_t> refused;  // by reason: symlink, too_large, bad_segment, …
  std::string last_error{};
  int64_t next_attempt_ms = 0;  // while backing off
};

class SegmentUploader {
 public:
  SegmentUploader(SegmentUploadOptions options, net::HttpClient& client,
                  std::function<std::string()> credential, Clock& clock);

  // One pass over the relayed and own segments, oldest first. kUnauthenticated when the
  // server refused the credential (the daemon stops); otherwise OK, problems counted.
  Status RunOnce();
  const SegmentUploadStats& stats() const { return stats_; }

 private:
  // Sends one file's bytes; true when it may be removed. kUnauthenticated stops the pass.
  Result<bool> Upload(const std::string& dir, const std::string& name, const std::string& host,
                      std::string_view bytes);
  void Quarantine(const std::string& dir, const std::string& host, const std::string& name,
                  const std::string& reason, const std::string& detail);

  SegmentUploadOptions options_;
  net::HttpClient& client_;
  std::function<std::string()> credential_;
  Clock& clock_;
  outbox::Backoff backoff_;
  SegmentUploadStats stats_;
  uint64_t quarantine_sequence_ = 0;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SEGMENT_UPLOAD_H_
