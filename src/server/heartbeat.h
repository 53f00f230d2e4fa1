// Validation of heartbeat documents (docs/formats/heartbeat.md) before they are stored.
#ifndef EXPANSE_SERVER_HEARTBEAT_H_
#define EXPANSE_SERVER_HEARTBEAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::server {

// The outcome of a request the server made of the controller (docs/formats/heartbeat.md).
struct RequestResult {
  int64_t id = 0;
  bool ok = false;
  std::string message;
};

struct HeartbeatSummary {
  std::string daemon_version;
  std::string controller_host;
  int nodes = 0;
  int gpus = 0;
  // "request_results": taken out of the stored document (the requests keep them).
  std::vector<RequestResult> request_results;
  // The document re-serialised (compact, keys sorted), as stored and served.
  std::string normalized_json;
};

// kInvalidArgument (reason "invalid_heartbeat") naming the first offending field, e.g.
// `heartbeat.nodes[3].gpus[0].memory_total_mib must be a non-negative integer`.
Result<HeartbeatSummary> ValidateHeartbeat(std::string_view body_json);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_HEARTBEAT_H_
