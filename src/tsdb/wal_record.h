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

using Batch = std::vector<std::pair<SeriesKey, std::vector<Sample>>>;

struct WalBatch {
  std::string batch_id;
  int64_t received_ms = 0;  // the store's clock at Append; ages the batch id
  Batch series;
};

std::string EncodeWalBatch(std::string_view batch_id, int64_t received_ms, const Batch& batch);
Result<WalBatch> DecodeWalBatch(std::string_view payload);

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_WAL_RECORD_H_
