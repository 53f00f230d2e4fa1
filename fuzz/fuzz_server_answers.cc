// What the server answers the controller, as the controller reads it: TLS says who answered,
// not that the answer is well formed (a proxy, an older or newer server, something else).
// Input: one selector byte, then the answer's bytes, read as
//   0: an error body (DecodeErrorAnswer),   1: an ingest answer (DecodeIngestAnswer),
//   2: a Retry-After value (ParseRetryAfterMs), 3: a heartbeat answer carrying requests.
// Properties:
// - nothing throws or crashes;
// - an error code is snake_case of at most 64 bytes and its message clean text of at most 1 KiB;
// - a Retry-After is never negative;
// - from a heartbeat answer only `scancel <a SLURM job id>` is ever run, at most once per
//   request id, and the outcomes waiting for the next heartbeat stay within their bound.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "agent/server_requests.h"
#include "core/memory_host.h"
#include "outbox/backoff.h"
#include "wire/error_answer.h"
#include "wire/field_reader.h"
#include "wire/records.h"

namespace {

void CheckErrorAnswer(std::string_view body) {
  const expanse::wire::ErrorAnswer answer = expanse::wire::DecodeErrorAnswer(body);
  if (answer.code.size() > 64 || answer.message.size() > 1024 ||
      !expanse::wire::IsCleanText(answer.message))
    std::abort();
  for (const char c : answer.code) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      std::abort();
  }
}

void CheckHeartbeatAnswer(std::string_view body) {
  expanse::MemoryHost host;
  host.OnRun("scancel",
             [](const std::vector<std::string>&) { return expanse::MemoryHost::Exit(0); });
  expanse::agent::ServerRequests requests(host, [](const std::string&) {});
  requests.HandleAnswer(body);
  const size_t first_pass = host.commands().size();
  requests.HandleAnswer(body);  // the next heartbeat's answer repeats it: nothing runs again
  if (host.commands().size() != first_pass || requests.PendingResults().size() > 64)
    std::abort();
  for (const std::string& command : host.commands()) {
    if (command.rfind("scancel ", 0) != 0 ||
        !expanse::agent::IsSlurmJobId(std::string_view(command).substr(8)))
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckErrorAnswer(body);
      break;
    case 1:
      (void)expanse::wire::DecodeIngestAnswer(body);
      break;
    case 2:
      if (const auto ms = expanse::outbox::ParseRetryAfterMs(body); ms && *ms < 0)
        std::abort();
      break;
    default:
      CheckHeartbeatAnswer(body);
      break;
  }
  return 0;
}
