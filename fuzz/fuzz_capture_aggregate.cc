// DecodeCaptureAggregate on arbitrary bytes: the sampler reads what a job's capture agent (run
// as the job's user) left in the node-local capture spool, parsed with the same bounded JSON
// parser the spool uses. It must never crash, and what it accepts must encode and decode again
// to the same record.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wire/capture_records.h"
#include "wire/json_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = expanse::wire::ParseJson(text, expanse::wire::JsonLimits{});
  if (!doc.ok())
    return 0;
  auto record = expanse::wire::DecodeCaptureAggregate(*doc, "agg", "bad_aggregate");
  if (!record.ok())
    return 0;
  const nlohmann::json encoded = expanse::wire::Encode(*record);
  auto again = expanse::wire::DecodeCaptureAggregate(encoded, "agg", "bad_aggregate");
  if (!again.ok() || expanse::wire::Encode(*again) != encoded)
    std::abort();
  return 0;
}
