#include "telemetry/series_buffer.h"

#include <cmath>
#include <utility>

namespace expanse::telemetry {

void SeriesBuffer::Add(const SeriesKey& key, int64_t at_ms, double value) {
  if (!std::isfinite(value) || samples_ >= max_samples_) {
    ++dropped_;
    return;
  }
  auto [it, inserted] = series_.try_emplace(key);
  Series& s = it->second;
  if (inserted || s.dt.empty()) {
    s.t0 = at_ms;
    s.last = at_ms;
    s.dt.push_back(0);
  } else {
    if (at_ms <= s.last) {
      ++dropped_;
      return;
    }
    s.dt.push_back(at_ms - s.last);
    s.last = at_ms;
  }
  s.v.push_back(value);
  ++samples_;
}

std::vector<wire::SeriesRecord> SeriesBuffer::Take() {
  std::vector<wire::SeriesRecord> out;
  out.reserve(series_.size());
  for (auto& [key, s] : series_) {
    out.push_back({.host = key.host,
                   .device = key.device,
                   .metric = key.metric,
                   .t0 = s.t0,
                   .dt = std::move(s.dt),
                   .v = std::move(s.v)});
  }
  series_.clear();
  samples_ = 0;
  return out;
}

}  // namespace expanse::telemetry
