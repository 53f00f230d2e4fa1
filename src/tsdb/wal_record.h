// Internal to the tsdb module: the payload of one WAL record, an appended batch
// (docs/formats/tsdb-wal.md).
#ifndef EXPANSE_TSDB_WAL_RECORD_H_
#define EXPANSE_TSDB_WAL_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "tsdb/sample.h"

namespace expanse::tsdb {

inline constexpr uint8_t kWalRecordBatch = 1;
// A zstd frame (content size recorded) that decompresses to a kWalRecordBatch payload.
inline constexpr uint8_t kWalRecordBatchZstd = 2;
// Bounds what a compressed record may claim to decompress to (the WAL's payload limit).
inline constexpr uint64_t kMaxWalBatchBytes = uint64_t{256} << 20;

struct WalBatch {
  std::string batch_id;
  int64_t received_ms = 0;  // the store's clock at Append; ages the batch id
  Batch series;
};

// A kWalRecordBatchZstd record when compressing makes it smaller (always, for telemetry: a
// batch's series keys and timestamps repeat, and the WAL written per second then shrinks
// ~8x, which is what an append's fdatasync waits on), else kWalRecordBatch.
std::string EncodeWalBatch(std::string_view batch_id, int64_t received_ms, const Batch& batch);
// The uncompressed form only (tests, and the inside of a compressed record).
std::string EncodeWalBatchUncompressed(std::string_view batch_id, int64_t received_ms,
                                       const Batch& batch);
Result<WalBatch> DecodeWalBatch(std::string_view payload);

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_WAL_RECORD_H_
