// Fuzzes the server's parsers of documents a compute sends: heartbeats
// (server/heartbeat.h) and ingest batches (server/ingest_batch.h), plain and zstd.
// Properties: never crash; refuse only with kInvalidArgument or kResourceExhausted; an
// accepted batch never holds more samples than the parser's cap, and every sample it
// holds is finite.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/heartbeat.h"
#include "server/ingest_batch.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

bool IsRefusal(const expanse::Status& s) {
  return s.code() == expanse::StatusCode::kInvalidArgument ||
         s.code() == expanse::StatusCode::kResourceExhausted;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  auto heartbeat = expanse::server::ValidateHeartbeat(bytes);
  Require(heartbeat.ok() || IsRefusal(heartbeat.status()));

  auto batch = expanse::server::ParseIngestBatch(bytes, "cmp_fuzz");
  Require(batch.ok() || IsRefusal(batch.status()));
  if (batch.ok()) {
    size_t samples = 0;
    for (const auto& [key, values] : batch->series) {
      Require(key.compute_id == "cmp_fuzz");
      for (const auto& s : values)
        Require(std::isfinite(s.v));
      samples += values.size();
    }
    Require(samples == batch->samples && samples <= expanse::server::kMaxIngestSamples);
  }

  auto decoded = expanse::server::DecodeIngestBody("application/zstd", bytes);
  Require(decoded.ok() || IsRefusal(decoded.status()));
  return 0;
}
