// A stack burst request as a sampler finds it in the shared control tree: a file name and its
// bytes, both hostile (docs/formats/stack-burst.md). Input: the name, a newline, the bytes.
// Properties:
// - DecodeStackBurstRequest never throws or crashes;
// - what it accepts is exactly what the controller would write: the name is the request's own
//   file name, and encoding and decoding it again gives the same request.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/stack_burst_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == std::string_view::npos)
    return 0;
  const std::string_view name = input.substr(0, newline);
  const std::string_view bytes = input.substr(newline + 1);
  expanse::Result<expanse::agent::StackBurstRequest> r =
      expanse::agent::DecodeStackBurstRequest(name, bytes);
  if (!r.ok())
    return 0;
  if (expanse::agent::StackBurstFileName(*r) != name)
    std::abort();
  expanse::Result<expanse::agent::StackBurstRequest> again =
      expanse::agent::DecodeStackBurstRequest(name, expanse::agent::EncodeStackBurstRequest(*r));
  if (!again.ok() || again->job_id != r->job_id || again->slurm_job_id != r->slurm_job_id ||
      again->reason != r->reason || again->trigger_ms != r->trigger_ms ||
      again->since_ms != r->since_ms || again->nonce != r->nonce) {
    std::abort();
  }
  return 0;
}
