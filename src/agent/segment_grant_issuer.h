// SegmentGrantIssuer: the controller's half of the direct transport of trace segments
// (docs/formats/segment-direct.md). A worker's sampler that wants to send a segment itself
// leaves request-<sha256>-<bytes> in <prefix>/spool/segment-grants/<host>/; the controller asks
// the server for a grant for that one segment with its credential (POST /dp/v1/segment-grants)
// and leaves the answer beside it as grant-<sha256>.json. The worker still holds no credential:
// a grant admits only the bytes it names, from the host it names, for 15 minutes.
//
// Requests are hostile input: only an empty, plain, single-linked file of the daemon account's
// with a well-formed name is answered; anything else named request-… is removed and counted.
// Unlike segment uploads, grants do not wait for the telemetry outbox to drain: they are a few
// hundred bytes each, and the bytes they admit do not pass through the controller.
#ifndef EXPANSE_AGENT_SEGMENT_GRANT_ISSUER_H_
#define EXPANSE_AGENT_SEGMENT_GRANT_ISSUER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"
#include "net/http_client.h"
#include "outbox/backoff.h"

namespace expanse::agent {

struct SegmentGrantIssuerOptions {
  std::string grant_root{};      // <prefix>/spool/segment-grants ("" = none)
  std::string data_plane_url{};  // where the grants are asked for, and the fallback upload URL
  uid_t expected_uid = 0;        // the daemon account the samplers write as
  size_t max_requests_per_pass = 64;
  // A pass lists a directory per host on the shared mount: at most one this often.
  int64_t min_pass_interval_ms = 2000;
  // Grants nobody took (the sampler gave up, the segment went by relay) are removed after this.
  int64_t stale_grant_ms = int64_t{60} * 60 * 1000;
  int64_t backoff_base_ms = 5000;
  int64_t backoff_cap_ms = int64_t{5} * 60 * 1000;
  std::function<void(std::string_view)> log{};
};

struct SegmentGrantIssuerStats {
  uint64_t issued = 0;
  uint64_t retries = 0;                     // passes ended by a failed request, kept for later
  std::map<std::string, uint64_t> refused;  // requests removed unanswered, by reason
  uint64_t stale_removed = 0;               // grants nobody took
  std::string last_error{};
  int64_t next_attempt_ms = 0;  // while backing off
};

class SegmentGrantIssuer {
 public:
  SegmentGrantIssuer(SegmentGrantIssuerOptions options, net::HttpClient& client,
                     std::function<std::string()> credential, Clock& clock);

  // Answers the waiting requests of every host. kUnauthenticated when the server refused the
  // credential (the daemon stops); otherwise OK, problems counted.
  Status RunOnce();
  const SegmentGrantIssuerStats& stats() const { return stats_; }

 private:
  // Asks for and writes one grant. false: the server is away or busy, the pass ends.
  Result<bool> Issue(const std::string& dir, const std::string& host, const std::string& name,
                     const std::string& sha256, uint64_t bytes);
  void Refuse(const std::string& dir, const std::string& name, const std::string& reason,
              const std::string& detail);
  bool Retry(std::string error);

  SegmentGrantIssuerOptions options_;
  net::HttpClient& client_;
  std::function<std::string()> credential_;
  Clock& clock_;
  outbox::Backoff backoff_;
  SegmentGrantIssuerStats stats_;
  int64_t last_pass_ms_ = 0;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SEGMENT_GRANT_ISSUER_H_
