// The telemetry store's data model: which series a number belongs to and the number.
#ifndef EXPANSE_TSDB_SAMPLE_H_
#define EXPANSE_TSDB_SAMPLE_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace expanse::tsdb {

// Identifies one series. There is no job label on purpose: job attribution is stored
// as intervals elsewhere, so a series does not multiply with every job that ran.
struct SeriesKey {
  std::string compute_id;
  std::string host;
  std::string device;  // GPU uuid, or "" for a host-level metric
  std::string metric;

  friend auto operator<=>(const SeriesKey& a, const SeriesKey& b) {
    return std::tie(a.compute_id, a.host, a.device, a.metric) <=>
           std::tie(b.compute_id, b.host, b.device, b.metric);
  }
  friend bool operator==(const SeriesKey&, const SeriesKey&) = default;
};

struct Sample {
  int64_t t_ms;  // Unix epoch milliseconds
  double v;
  friend bool operator==(const Sample&, const Sample&) = default;
};

// What one append carries: samples grouped by series, each group in time order.
using Batch = std::vector<std::pair<SeriesKey, std::vector<Sample>>>;

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_SAMPLE_H_
