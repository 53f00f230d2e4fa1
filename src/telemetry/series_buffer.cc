#include "telemetry/series_buffer.h"

#include <cmath>

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

nlohmann::json SeriesBuffer::TakeJson() {
  nlohmann::json out = nlohmann::json::array();
  for (auto& [key, s] : series_) {
    nlohmann::json entry = {{"host", key.host}, {"metric", key.metric}};
    if (!key.device.empty())
      entry["device"] = key.device;
    entry["t0"] = s.t0;
    entry["dt"] = std::move(s.dt);
    entry["v"] = std::move(s.v);
    out.push_back(std::move(entry));
  }
  series_.clear();
  samples_ = 0;
  return out;
}

}  // namespace expanse::telemetry
