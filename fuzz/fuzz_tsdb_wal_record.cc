// Fuzzes the tsdb WAL record decoder (src/tsdb/wal_record.h): the records a restart
// replays, plain (type 1) or zstd-compressed (type 2). Properties:
//  - decoding arbitrary bytes never crashes and fails only with kDataLoss "wal_corrupt";
//  - whatever decodes re-encodes, in both forms, to a record that decodes to the same batch.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tsdb/wal_record.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

bool SameBatch(const expanse::tsdb::WalBatch& a, const expanse::tsdb::WalBatch& b) {
  if (a.batch_id != b.batch_id || a.received_ms != b.received_ms ||
      a.series.size() != b.series.size())
    return false;
  for (size_t i = 0; i < a.series.size(); ++i) {
    const auto& [key_a, samples_a] = a.series[i];
    const auto& [key_b, samples_b] = b.series[i];
    if (!(key_a == key_b) || samples_a.size() != samples_b.size())
      return false;
    for (size_t j = 0; j < samples_a.size(); ++j) {
      if (samples_a[j].t_ms != samples_b[j].t_ms ||
          std::bit_cast<uint64_t>(samples_a[j].v) != std::bit_cast<uint64_t>(samples_b[j].v))
        return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto decoded = expanse::tsdb::DecodeWalBatch(bytes);
  if (!decoded.ok()) {
    Require(decoded.status().code() == expanse::StatusCode::kDataLoss &&
            decoded.status().reason() == "wal_corrupt");
    return 0;
  }
  for (const std::string& record :
       {expanse::tsdb::EncodeWalBatch(decoded->batch_id, decoded->received_ms, decoded->series),
        expanse::tsdb::EncodeWalBatchUncompressed(decoded->batch_id, decoded->received_ms,
                                                  decoded->series)}) {
    auto again = expanse::tsdb::DecodeWalBatch(record);
    Require(again.ok() && SameBatch(*decoded, *again));
  }
  return 0;
}
