// SeriesBuffer: samples collected between flushes, grouped by series, in the shape the ingest
// batch uses (docs/formats/ingest-batch.md): per series a first timestamp t0 and per sample the
// offset from the previous one. Memory grows with samples held, so the owner flushes it on a
// schedule (the sampler flush interval) and caps it (`max_samples`, oldest series kept, newest
// samples dropped and counted) so a stalled flush cannot grow the daemon without bound.
#ifndef EXPANSE_TELEMETRY_SERIES_BUFFER_H_
#define EXPANSE_TELEMETRY_SERIES_BUFFER_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "wire/records.h"

namespace expanse::telemetry {

struct SeriesKey {
  std::string host;
  std::string device;  // GPU UUID, "job/<id>", or "" for host-level metrics
  std::string metric;
  auto operator<=>(const SeriesKey&) const = default;
};

class SeriesBuffer {
 public:
  explicit SeriesBuffer(size_t max_samples = 1'000'000) : max_samples_(max_samples) {}

  // Adds one sample. Samples of a series must come in time order; an older or equal
  // timestamp replaces nothing and is dropped (counted), since the ingest format has no
  // negative offsets.
  void Add(const SeriesKey& key, int64_t at_ms, double value);

  size_t samples() const { return samples_; }
  bool empty() const { return samples_ == 0; }
  uint64_t dropped() const { return dropped_; }

  // The buffered series as ingest records, in key order, then empties the buffer.
  std::vector<wire::SeriesRecord> Take();

 private:
  struct Series {
    int64_t t0 = 0;
    int64_t last = 0;
    std::vector<int64_t> dt;
    std::vector<double> v;
  };
  size_t max_samples_;
  size_t samples_ = 0;
  uint64_t dropped_ = 0;
  std::map<SeriesKey, Series> series_;
};

}  // namespace expanse::telemetry

#endif  // EXPANSE_TELEMETRY_SERIES_BUFFER_H_
