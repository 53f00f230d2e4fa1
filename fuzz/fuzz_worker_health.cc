// A worker's health report through the controller's heartbeat, against the server's heartbeat
// validation. Input: the report's payload as a worker wrote it. Properties:
// - BuildHeartbeat never throws or crashes, whatever the report holds;
// - the heartbeat it builds, relaying what it keeps of the report, is one the server accepts:
//   one worker's bad report can never make the server refuse the controller's heartbeat (the
//   compute would then look dead).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/heartbeat_builder.h"
#include "server/heartbeat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  expanse::agent::HeartbeatInputs in;
  in.daemon_version = "1.0.0";
  in.controller_host = "ctl";
  expanse::spool::WorkerHealthReport report;
  report.host = "w1";
  report.fresh = true;
  report.payload.assign(reinterpret_cast<const char*>(data), size);
  in.workers.reports.push_back(report);
  in.workers.fresh = 1;
  in.workers.hosts = 1;
  const std::string body = expanse::agent::BuildHeartbeat(in).dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!expanse::server::ValidateHeartbeat(body).ok())
    std::abort();
  return 0;
}
