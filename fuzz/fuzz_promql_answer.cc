// libFuzzer target for the remote telemetry store's answer parser (src/promstore/promql.h): the
// JSON a Prometheus-compatible query API sends back, which comes over the network from another
// program. Properties, checked on every input:
//  - nothing crashes, hangs or trips a sanitizer;
//  - a refusal is kInvalidArgument (not an answer) or kUnavailable (the store's error answer),
//    with a message; the store's message is cut to 300 bytes;
//  - an accepted answer's points have times that are non-negative milliseconds.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "promstore/promql.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto answer = expanse::promstore::ParseQueryAnswer(body);
  if (!answer.ok()) {
    const expanse::StatusCode code = answer.status().code();
    if (code != expanse::StatusCode::kInvalidArgument && code != expanse::StatusCode::kUnavailable)
      std::abort();
    if (answer.status().message().empty() || answer.status().message().size() > 400)
      std::abort();
    return 0;
  }
  for (const auto& series : *answer) {
    for (const auto& [t_ms, value] : series.points) {
      (void)value;
      if (t_ms < 0)
        std::abort();
    }
  }
  return 0;
}
