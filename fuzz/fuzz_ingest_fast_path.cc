// Differential fuzzing of the ingest endpoint's single-pass parser (ParseCommonIngestBatch)
// against the full nlohmann parser it stands in front of. Property: whenever the fast path
// accepts a document, the full parser accepts it too and yields the same batch, bit for bit
// (stream, sequence, series keys, timestamps and the exact bits of every value, so -0 and
// rounding differences count). What the fast path declines is the full parser's alone.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "server/ingest_batch.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto fast = expanse::server::ParseCommonIngestBatch(text, "cmp_fuzz");
  if (!fast.has_value())
    return 0;
  auto full = expanse::server::ParseIngestBatchWithoutFastPath(text, "cmp_fuzz");
  Require(full.ok());
  Require(fast->stream == full->stream && fast->sequence == full->sequence);
  Require(fast->samples == full->samples);
  Require(fast->series.size() == full->series.size());
  for (size_t i = 0; i < fast->series.size(); ++i) {
    const auto& [fast_key, fast_samples] = fast->series[i];
    const auto& [full_key, full_samples] = full->series[i];
    Require(fast_key == full_key);
    Require(fast_samples.size() == full_samples.size());
    for (size_t j = 0; j < fast_samples.size(); ++j) {
      Require(fast_samples[j].t_ms == full_samples[j].t_ms);
      Require(SameBits(fast_samples[j].v, full_samples[j].v));
    }
  }
  Require(fast->jobs.empty() == full->jobs.empty());
  Require(fast->stacks.size() == full->stacks.size());
  return 0;
}
