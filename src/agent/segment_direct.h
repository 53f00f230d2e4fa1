// SegmentDirect: a worker's half of the direct transport of trace segments
// (EXPANSE_SEGMENT_UPLOAD_MODE=direct, and auto while it works; docs/formats/segment-direct.md).
// The sampler sends its node's ready segments to the data plane itself, each with a grant the
// controller asked the server for on its behalf, so the segment's bytes never cross the shared
// mount and the worker never holds a credential:
//
//   1. the oldest segment of <control>/capture-ready: request-<sha256>-<bytes> into
//      <prefix>/spool/segment-grants/<host>/ (one empty file);
//   2. the controller answers grant-<sha256>.json there (SegmentGrantIssuer);
//   3. POST <upload_url> with the grant, on a thread of its own so sampling never waits on the
//      network; after a 200 the ready file and the grant go.
//
// `auto` relays instead (the sampler's SegmentRelay) when no grant comes within grant_wait_ms
// (no controller that issues grants) or the data plane cannot be reached from this node, and
// keeps relaying for fallback_ms before it tries direct again. `direct` never relays: it asks
// again, and retries with backoff. A segment the server refuses for good (400, 413, 415, or its
// grant does not match it) moves to <control>/segment-quarantine.
#ifndef EXPANSE_AGENT_SEGMENT_DIRECT_H_
#define EXPANSE_AGENT_SEGMENT_DIRECT_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "net/http_client.h"
#include "outbox/backoff.h"

namespace expanse::agent {

struct SegmentDirectOptions {
  bool may_relay = true;          // auto: true; direct: false
  std::string ready_dir{};        // <control>/capture-ready
  std::string grant_dir{};        // <SegmentGrantRoot>/<host>
  std::string quarantine_dir{};   // <control>/segment-quarantine
  uid_t expected_uid = 0;         // the controller writes grants as the daemon account
  net::HttpClientOptions http{};  // daemon.env's CA file and proxy
  int64_t grant_wait_ms = 30'000;
  int64_t rerequest_ms = int64_t{5} * 60 * 1000;
  int64_t fallback_ms = int64_t{10} * 60 * 1000;
  int64_t backoff_base_ms = 5000;
  int64_t backoff_cap_ms = int64_t{5} * 60 * 1000;
  size_t max_quarantined = 20;
  std::function<void(const std::string&)> log{};
};

struct SegmentDirectStats {
  uint64_t requested = 0;                   // grant requests written
  uint64_t uploaded = 0;                    // segments the server took (new or duplicate)
  uint64_t duplicates = 0;                  // ... of which it had already
  uint64_t bytes = 0;                       // uncompressed bytes uploaded
  uint64_t retries = 0;                     // failed sends kept for later (direct)
  uint64_t fallbacks = 0;                   // times auto turned to the relay
  std::map<std::string, uint64_t> refused;  // segments quarantined, grant files dropped; by reason
  std::string last_error{};
  int64_t relay_until_ms = 0;  // auto: segments go by relay until then
};

class SegmentDirect {
 public:
  enum class Next {
    kIdle,   // nothing ready
    kBusy,   // a segment is on its way (asked for, or being sent)
    kRelay,  // auto: let the relay take the oldest ready segment now
  };

  SegmentDirect(SegmentDirectOptions options, Clock& clock);
  ~SegmentDirect();  // waits for a send in flight (bounded by the client's timeouts)

  // One step for the oldest ready segment, from the sampler's flush. Never blocks on the
  // network, never fails: problems are counted.
  Next Flush();
  // Blocks until a send in flight has its answer (the next Flush handles it): for shutdown
  // and tests.
  void WaitForSend();
  const SegmentDirectStats& stats() const { return stats_; }

 private:
  struct Sent {
    bool answered = false;  // false: no HTTP answer (connect, TLS, timeout, unreadable file)
    bool gone = false;      // the ready file vanished (the intake's bound dropped it)
    int status = 0;
    std::string code;   // the error answer's code
    std::string error;  // what went wrong, for last_error
    bool duplicate = false;
    uint64_t bytes = 0;
  };
  Sent Send(std::string path, std::string url, std::string grant);
  void Finish(Sent sent);
  Next FallBack(const std::string& why);
  void Retry(const std::string& why);
  void Quarantine(const std::string& reason);
  void DropGrant();
  void Forget();  // the current segment is done with

  SegmentDirectOptions options_;
  Clock& clock_;
  std::unique_ptr<net::HttpClient> client_;
  std::string client_error_;
  outbox::Backoff backoff_;
  SegmentDirectStats stats_;
  int64_t next_attempt_ms_ = 0;
  // The segment being handled: the oldest ready one.
  std::string name_;
  std::string sha256_;
  uint64_t bytes_ = 0;
  int64_t requested_ms_ = 0;  // 0: no request written for it yet
  std::future<Sent> inflight_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SEGMENT_DIRECT_H_
