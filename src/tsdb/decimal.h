// Internal to the tsdb module: lossless conversion of a run of doubles to integer
// mantissas sharing one decimal scale, the idea behind VictoriaMetrics' compression.
// Telemetry such as "694.77 W" or "31859 MiB" is a short decimal; as an integer its
// deltas are small and varint/zstd friendly, where its double bits are not.
#ifndef EXPANSE_TSDB_DECIMAL_H_
#define EXPANSE_TSDB_DECIMAL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace expanse::tsdb {

// 10^scale as an exact double; scale in [0, kMaxDecimalScale].
double PowerOfTen(int scale);

// The smallest scale s such that every value equals mantissa / 10^s bit for bit
// (so -0.0, inf, NaN and values needing more digits yield nullopt), with the mantissas.
struct DecimalRun {
  int scale = 0;
  std::vector<int64_t> mantissas;
};
std::optional<DecimalRun> ToDecimal(std::span<const double> values);

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_DECIMAL_H_
